"""Simulated engines take the node's memory as the real ones do on a GB10 (one pool for GPU and OS): the
weights while they load, the KV cache after, and give it back when they end. Two "nodes" are two
stand-in meminfo files here, as a demo node's is bound over its /proc/meminfo."""

from __future__ import annotations

import re
import signal

import pytest

from sparktui.demo import hardware
from sparktui.sim import gpu, hostmem
from tests.simhelpers import SimProcess, free_port, launcher_argv, make_model, module_argv

SPEED = 50
GIB_KB = 1 << 20
MODEL_BYTES = 61_064_245_248  # the demo's 30B checkpoint: 56.9 GiB of weights


def available_gib(path) -> float:
    return int(re.search(r"^MemAvailable:\s+(\d+)", path.read_text(), re.M).group(1)) / GIB_KB


def number(line: str, pattern: str) -> float:
    return float(re.search(pattern, line).group(1))


@pytest.fixture
def node(tmp_path):
    """A node's meminfo and the ledger its engine's container would have."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(hardware.meminfo())
    return meminfo, {hostmem.MEMINFO_ENV: str(meminfo), hostmem.LEDGER_ENV: str(tmp_path / "held")}


def test_vllm_takes_the_weights_then_the_kv_cache_and_gives_them_back(tmp_path, node):
    meminfo, env = node
    model = str(make_model(tmp_path / "m", shards=4, total_bytes=MODEL_BYTES))
    start = available_gib(meminfo)
    p = SimProcess(launcher_argv("vllm", "serve", model, "--port", str(free_port())), speed=SPEED, extra_env=env)
    with p:
        i = p.wait_for("Model loading took", timeout=60)  # the line after "Loading weights took"
        weights = number(p.snapshot()[i], r"Model loading took ([\d.]+) GiB")
        assert weights == pytest.approx(MODEL_BYTES / 2**30, abs=1e-3)
        # the weights are in use once they are loaded, the KV cache comes after
        assert start - available_gib(meminfo) >= gpu.RUNTIME_OVERHEAD_GIB + weights - 0.01
        i = p.wait_for("Available KV cache memory", timeout=60)
        kv = number(p.snapshot()[i], r"memory: ([\d.]+) GiB")
        p.wait_for("Application startup complete", timeout=60)
        held = gpu.RUNTIME_OVERHEAD_GIB + weights + gpu.ACTIVATION_PEAK_GIB + kv + 0.52
        assert start - available_gib(meminfo) == pytest.approx(held, abs=0.02)
        assert held == pytest.approx(gpu.total_gib() * 0.9 + gpu.RUNTIME_OVERHEAD_GIB + 0.02, abs=0.02)
        assert 6 < available_gib(meminfo) < 8  # what a Spark is left with under vLLM's default 0.9
    assert p.proc.returncode == 0
    assert available_gib(meminfo) == start and meminfo.read_text() == hardware.meminfo()
    assert not list((tmp_path / "held").iterdir())


def test_two_sglang_ranks_take_memory_on_their_own_nodes(tmp_path):
    model = str(make_model(tmp_path / "m", shards=4, total_bytes=MODEL_BYTES))
    files, envs = [], []
    for k in (1, 2):
        f = tmp_path / f"meminfo{k}"
        f.write_text(hardware.meminfo())
        files.append(f)
        envs.append(
            {
                hostmem.MEMINFO_ENV: str(f),
                hostmem.LEDGER_ENV: str(tmp_path / f"held{k}"),
                "SGLANG_HOST_IP": f"127.0.0.{k + 1}",
            }
        )
    start = available_gib(files[0])
    dist, port = free_port("127.0.0.2"), free_port("127.0.0.2")
    common = ["--model-path", model, "--tp", "2", "--nnodes", "2", "--dist-init-addr", f"127.0.0.2:{dist}"]
    worker = SimProcess(
        module_argv("sglang.launch_server", *common, "--node-rank", "1"), speed=SPEED, extra_env=envs[1]
    )
    head = SimProcess(
        module_argv("sglang.launch_server", *common, "--node-rank", "0", "--host", "127.0.0.2", "--port", str(port)),
        speed=SPEED,
        extra_env=envs[0],
    )
    with worker, head:
        i = head.wait_for("Load weight end.", timeout=60)
        weights = number(head.snapshot()[i], r"mem usage=([\d.]+) GB")
        assert weights == pytest.approx(MODEL_BYTES / 2 / 2**30, abs=0.01)  # each rank half the model
        assert start - available_gib(files[0]) >= gpu.RUNTIME_OVERHEAD_GIB + weights - 0.01
        i = head.wait_for("KV Cache is allocated.", timeout=60)
        kv = 2 * number(head.snapshot()[i], r"K size: ([\d.]+) GB")
        head.wait_for("The server is fired up", timeout=60)
        worker.wait_for("Capture cuda graph end.", timeout=60)
        for f in files:  # the same on both nodes, and nothing of one rank lands on the other's node
            assert start - available_gib(f) == pytest.approx(gpu.RUNTIME_OVERHEAD_GIB + weights + kv + 0.86, abs=0.03)
        # killed, as `docker kill` does: what it held stays until its container's end hands it back
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(10)
        assert available_gib(files[1]) < start - 90
        hostmem.release_ledger(tmp_path / "held2")
        assert available_gib(files[1]) == start
    assert available_gib(files[0]) == start and files[0].read_text() == hardware.meminfo()
