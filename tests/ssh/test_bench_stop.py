"""However `sparktui bench` ends, the client on the head ends too: SIGTERM and a hangup stop it before sparktui
exits, and after kill -9 the watchdog that sparktui held open on the head stops it.

The head's client is the engine simulator's `vllm bench serve` on its PATH (as a node with vLLM installed
has it), against a slow simulated vLLM, so the run is still going when the signal comes."""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

from sparktui.sim import SHIMS_DIR
from tests.simhelpers import SimProcess, free_port, launcher_argv, make_model

from .test_bench_cli import env_for, group_alive, group_gone, serve
from .test_deploy_cli import write_config
from .test_deploy_fakes import fake_cluster  # noqa: F401 (fixture)

REPO = Path(__file__).resolve().parents[2]


def sim_client(bin_dir: Path) -> None:
    """The simulator's `vllm` (it carries `bench serve`) on the fake head's PATH."""
    exe = bin_dir / "vllm"
    exe.write_text(
        f"#!/bin/sh\nexport PYTHONPATH={shlex.quote(f'{SHIMS_DIR}:{REPO}')}\n"
        f'exec {shlex.join(launcher_argv("vllm"))} "$@"\n'
    )
    exe.chmod(0o755)


async def head_with_sim_client(fake_cluster, tmp_path: Path):  # noqa: F811
    fc = await fake_cluster(1)
    fc.nodes[0].server.forwarding = True
    sim_client(tmp_path / "bin")
    fc.config.model.path = str(make_model(tmp_path / "model", shards=2))
    return fc, write_config(fc.config, tmp_path / "c.yaml")


def slow_vllm(model: str, speed: float = 50.0) -> SimProcess:
    """A simulated vLLM (not started) and its port. At 50x it starts in ~1 s (~4 s at 10x); its answers are
    slow by their length: a request of the default --output-len 4000 lasts seconds."""
    port = free_port()
    return SimProcess(
        launcher_argv(
            "vllm", "serve", model, "--served-model-name", "sim-model", "--host", "127.0.0.1", "--port", str(port)
        ),
        speed=speed,
    ), port


async def start_bench(conf: Path, *args: str):
    """sparktui bench, once its client runs on the head: (process, the job's process group, its state dir)."""
    args = args or ("--output-len", "4000")
    p = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sparktui",
        "bench",
        "--concurrency",
        "1",
        *args,
        "--config",
        str(conf),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env_for(conf),
    )
    seen = b""
    while b"bench: concurrency 1" not in seen:
        line = await asyncio.wait_for(p.stderr.readline(), 120)
        assert line, seen.decode()
        seen += line
    (pidfile,) = (conf.parent / "n1").glob(".local/state/sparktui/bench/*/pid")
    pid = int(pidfile.read_text())
    assert group_alive(pid)
    return p, pid, pidfile.parent, seen


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 143)])
async def test_a_terminated_bench_stops_the_client_before_it_exits(fake_cluster, tmp_path, sig, code):
    fc, conf = await head_with_sim_client(fake_cluster, tmp_path)
    eng, port = slow_vllm(fc.config.model.path)
    with eng:
        eng.wait_for("Application startup complete.", timeout=120)
        serve(fc, conf, "vllm", port)
        p, pid, state, seen = await start_bench(conf)
        p.send_signal(sig)
        out, err = await asyncio.wait_for(p.communicate(), 60)
    assert p.returncode == code, err
    assert b"the client on the head was stopped too" in seen + err and b"Traceback" not in err
    assert not group_alive(pid)  # stopped before sparktui exited: no wait here
    assert (state / "rc").exists()


async def test_a_killed_bench_leaves_no_client_running_on_the_head(fake_cluster, tmp_path):
    fc, conf = await head_with_sim_client(fake_cluster, tmp_path)
    eng, port = slow_vllm(fc.config.model.path)
    with eng:
        eng.wait_for("Application startup complete.", timeout=120)
        serve(fc, conf, "vllm", port)
        p, pid, state, _ = await start_bench(conf)
        p.kill()  # no handler runs: only the head can notice
        await p.wait()
        assert await group_gone(pid, timeout=30), "the client outlived sparktui"
    # the watchdog marks the job stopped just after its group is gone
    deadline = time.monotonic() + 10
    while not (state / "rc").exists():
        assert time.monotonic() < deadline, "no rc after the stop"
        await asyncio.sleep(0.05)
    assert (state / "rc").read_text().strip() == "130"
