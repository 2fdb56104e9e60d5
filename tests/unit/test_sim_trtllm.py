"""The simulated TensorRT-LLM: trtllm-serve's Click options, and mpirun + trtllm-llmapi-launch + the containers'
sshd run as processes on 127.0.0.1 (ready, HTTP, a rank that cannot be reached)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from sparktui.core.engines import trtllm as eng
from sparktui.sim import sim_env
from sparktui.sim.trtllm_args import UsageError, parse

pytestmark = pytest.mark.unit
SPEED = 200.0
BOUND_S = 60.0  # no step of these tests may take longer; every wait below stops by then


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_planned_serve_flags_parse():
    a = parse(
        [
            "serve",
            "/models/m",
            "--backend",
            "pytorch",
            "--tp_size",
            "2",
            "--pp_size",
            "1",
            "--host",
            "0.0.0.0",
            "--port",
            "8355",
            "--kv_cache_free_gpu_memory_fraction",
            "0.8",
            "--max_seq_len",
            "4096",
            "--trust_remote_code",
        ]
    )
    assert (a.model, a.tensor_parallel_size, a.port, a.free_gpu_memory_fraction) == ("/models/m", 2, 8355, 0.8)
    assert a.max_seq_len == 4096 and a.trust_remote_code is True


def test_unknown_option_is_clicks_usage_error():
    with pytest.raises(UsageError) as e:
        parse(["/models/m", "--tp-size", "2"])
    assert e.value.text == (
        "Usage: trtllm-serve serve [OPTIONS] MODEL\n"
        "Try 'trtllm-serve serve --help' for help.\n\n"
        "Error: No such option: --tp-size (Possible options: --ep_size, --pp_size, --tp_size)"
    )
    with pytest.raises(UsageError) as e:
        parse(["/models/m", "--trust-remote-code"])
    assert e.value.text.endswith("Error: No such option: --trust-remote-code Did you mean --trust_remote_code?")
    with pytest.raises(UsageError) as e:
        parse(["/models/m", "--served-model-name", "x"])
    assert "\nError: No such option: --served-model-name" in e.value.text
    with pytest.raises(UsageError) as e:
        parse(["--port", "1"])
    assert e.value.text.endswith("Error: Missing argument 'MODEL'.")


def test_serve_shim_exits_2_with_clicks_words(tmp_path):
    p = subprocess.run(
        ["trtllm-serve", "/models/m", "--api-key", "k"],
        env=sim_env(speed=SPEED),
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert p.returncode == 2
    assert "Error: No such option: --api-key" in p.stderr


def make_model(tmp_path) -> str:
    d = tmp_path / "Tiny-Model"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "num_hidden_layers": 2,
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "max_position_embeddings": 2048,
            }
        )
    )
    (d / "model.safetensors").write_bytes(b"\0" * 1024)
    return str(d)


def start(cmd: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def read_until(proc: subprocess.Popen, needle: str, seen: list[str]) -> bool:
    """Read lines until one holds `needle` (True) or the process ends (False); bounded by the caller's kill."""
    for line in proc.stdout:
        seen.append(line)
        if needle in line:
            return True
    return False


def stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()


def mpirun_cmd(hostfile, ssh_port: int, model: str, http_port: int, extra=()) -> list[str]:
    return [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        "2",
        "--hostfile",
        str(hostfile),
        "--map-by",
        "ppr:1:node",
        "--mca",
        "plm_rsh_args",
        eng.ssh_args(ssh_port),
        "trtllm-llmapi-launch",
        "trtllm-serve",
        model,
        "--backend",
        "pytorch",
        "--tp_size",
        "2",
        "--pp_size",
        "1",
        "--host",
        "127.0.0.1",
        "--port",
        str(http_port),
        *extra,
    ]


def with_deadline(procs, seconds: float = BOUND_S):
    """Kill the processes if the test is still waiting on them after `seconds` (so no read blocks forever)."""
    import threading

    t = threading.Timer(seconds, lambda: [p.kill() for p in procs if p.poll() is None])
    t.daemon = True
    t.start()
    return t


def two_nodes(tmp_path, env: dict):
    """A model, a container's sshd on 127.0.0.1 and a hostfile naming it twice (rank 0 runs beside mpirun):
    (model, sshd port, HTTP port, sshd process, hostfile)."""
    model = make_model(tmp_path)
    sshd_port, http_port = free_port(), free_port()
    sshd = start(["sshd", "-D", "-e", "-p", str(sshd_port)], env)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1\n127.0.0.1\n")
    return model, sshd_port, http_port, sshd, hostfile


def test_two_ranks_reach_ready_and_serve(tmp_path):
    env = sim_env(speed=SPEED)
    model, sshd_port, http_port, sshd, hostfile = two_nodes(tmp_path, env)
    opts = tmp_path / "extra.yml"
    opts.write_text("return_perf_metrics: true\n")
    mpi = None
    try:
        seen_sshd: list[str] = []
        timer = with_deadline([sshd])
        assert read_until(sshd, "Server listening", seen_sshd)
        socket.create_connection(("127.0.0.1", sshd_port), timeout=10).close()  # the plan's wait for the port
        mpi = start(mpirun_cmd(hostfile, sshd_port, model, http_port, ["--extra_llm_api_options", str(opts)]), env)
        timer2 = with_deadline([mpi, sshd])
        seen: list[str] = []
        assert read_until(mpi, eng.READY_LINE, seen), "".join(seen)
        text = "".join(seen)
        assert "mpi_rank: 0" in text and "rank0 run mgmn leader node with mpi_world_size: 2" in text
        assert "[TensorRT-LLM][INFO] MPI size: 2, MPI local size: 1, rank: 1" in text
        # what the engine module reads from a real log, the simulator prints
        for key in ("version", "mpi_rank", "leader", "kv_cache", "ready"):
            assert eng.PROGRESS[key].search(text), key
        assert read_until(sshd, "MPI size: 2, MPI local size: 1, rank: 1", seen_sshd)  # the remote rank's log
        # the bare connect before it started no rank: the container log shows rank 1 only
        assert [x.strip() for x in seen_sshd if x.startswith("mpi_rank")] == ["mpi_rank: 1"], seen_sshd
        base = f"http://127.0.0.1:{http_port}"
        with urllib.request.urlopen(base + "/health", timeout=10) as r:
            assert r.status == 200
        with urllib.request.urlopen(base + "/v1/models", timeout=10) as r:
            assert json.load(r)["data"][0]["id"] == "Tiny-Model"
        req = urllib.request.Request(
            base + "/v1/chat/completions",
            method="POST",
            data=json.dumps(
                {"model": "Tiny-Model", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
            ).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            body = json.load(r)
        assert body["choices"][0]["message"]["content"]
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            assert isinstance(json.load(r), list)  # iteration stats, JSON
        with urllib.request.urlopen(base + "/prometheus/metrics", timeout=10) as r:
            prom = r.read().decode()
        # the release's histograms, moved by the chat completion; not main's token counters
        assert 'trtllm_time_to_first_token_seconds_count{engine_type="undefined",model_name="undefined"} 1.0' in prom
        assert "trtllm_generation_tokens_total" not in prom
        timer.cancel()
        timer2.cancel()
    finally:
        stop(*(p for p in (mpi, sshd) if p is not None))


def test_sshds_of_nodes_sharing_a_kernel_each_hold_the_port_on_their_own_addresses():
    # the demo's nodes share this machine's network: each container's sshd, like sshd in a network namespace of
    # its own, listens on every address of its node, and two nodes' sshds take the same port side by side
    port = free_port()
    procs = [
        start(
            ["sshd", "-D", "-e", "-p", str(port)],
            sim_env(speed=SPEED, interfaces=f"lo=127.0.0.1/32,mgmt=127.0.4.{k}/24,fab=127.0.3.{k}/24"),
        )
        for k in (21, 22)
    ]
    try:
        timer = with_deadline(procs)
        for k, p in zip((21, 22), procs):
            seen: list[str] = []
            assert read_until(p, f"Server listening on 127.0.3.{k} port {port}.", seen), seen
            assert any(f"Server listening on 127.0.4.{k} port {port}." in x for x in seen), seen
            socket.create_connection((f"127.0.3.{k}", port), timeout=10).close()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=10).close()  # lo is left to this machine
        assert all(p.poll() is None for p in procs)
        timer.cancel()
    finally:
        stop(*procs)


def test_refused_rank_fails_with_ssh_and_orte_words(tmp_path):
    env = sim_env(speed=SPEED)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1\n127.0.0.1\n")
    port = free_port()  # nothing listens there
    p = subprocess.run(
        mpirun_cmd(hostfile, port, make_model(tmp_path), free_port()),
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert p.returncode == 1
    assert f"ssh: connect to host 127.0.0.1 port {port}: Connection refused" in p.stderr
    assert "ORTE was unable to reliably start one or more daemons." in p.stderr
    assert "Application startup complete." not in p.stdout


def test_silent_rank_hangs_the_launch_until_ssh_gives_up(tmp_path):
    # An sshd that accepts TCP but never answers (as a container whose sshd never started would look behind a
    # listening port): mpirun prints nothing and starts nothing until ssh's connect time runs out.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    env = sim_env(speed=SPEED)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1\n127.0.0.1\n")
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            mpirun_cmd(hostfile, port, make_model(tmp_path), free_port()),
            env=env,
            capture_output=True,
            text=True,
            timeout=BOUND_S,
        )
    finally:
        silent.close()
    waited = time.monotonic() - t0
    assert p.returncode == 1
    assert waited >= 127.0 / SPEED  # the hang: ssh's whole connect time, in simulated seconds
    assert "Connection timed out during banner exchange" in p.stderr
    assert "ORTE was unable to reliably start one or more daemons." in p.stderr
    assert "mpi_rank" not in p.stdout + p.stderr  # no rank ever started


def test_remote_rank_without_its_interface_ends_the_job_with_mpis_words(tmp_path):
    # the worker container's NCCL_SOCKET_IFNAME names no interface of that node: its rank fails NCCL's bootstrap
    env = sim_env(speed=SPEED, interfaces="lo=127.0.0.1/8,fab0=127.0.0.2/24")
    sshd_port = free_port()
    sshd = start(["sshd", "-D", "-e", "-p", str(sshd_port)], dict(env, NCCL_SOCKET_IFNAME="enp9s0f0np0"))
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1\n127.0.0.2\n")  # the worker by its fabric address, as plans list it
    timer = with_deadline([sshd])
    try:
        assert read_until(sshd, "Server listening", [])
        p = subprocess.run(
            mpirun_cmd(hostfile, sshd_port, make_model(tmp_path), free_port()),
            env=dict(env, NCCL_SOCKET_IFNAME="fab0"),
            capture_output=True,
            text=True,
            timeout=BOUND_S,
        )
        seen: list[str] = []
        assert read_until(sshd, "no socket interface found", seen)
        assert "NCCL_SOCKET_IFNAME set by environment to enp9s0f0np0" in "".join(seen)
        timer.cancel()
    finally:
        stop(sshd)
    assert p.returncode == 1
    assert "mpirun detected that one or more processes exited with non-zero status" in p.stderr
    assert "Process name: [[" in p.stderr and "],1]" in p.stderr
    assert "Application startup complete." not in p.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="Open MPI's root check applies to root only")
def test_mpirun_as_root_needs_the_override_like_open_mpi(tmp_path):
    env = {k: v for k, v in sim_env(speed=SPEED).items() if not k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
    p = subprocess.run(["mpirun", "-np", "1", "true"], env=env, capture_output=True, text=True, timeout=BOUND_S)
    assert p.returncode == 1 and "mpirun has detected an attempt to run as root." in p.stderr
    ok = dict(env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(
        ["mpirun", "-np", "1", "--hostfile", str(tmp_path / "none"), "true"],
        env=ok,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert p.returncode == 1 and "Open RTE was unable to open the hostfile:" in p.stderr


def _post(base: str, timeout: float, max_tokens: int = 8) -> tuple[int, str]:
    req = urllib.request.Request(
        base + "/v1/chat/completions",
        method="POST",
        data=json.dumps(
            {"model": "Tiny-Model", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "hi"}]}
        ).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:  # no answer in time
        return 0, str(e)


def _get(base: str, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_a_frozen_rank_stalls_serving_while_health_answers_until_the_hang_detector_fires(tmp_path):
    import signal
    import threading
    from sparktui.core.diagnosis.diagnose import Diagnoser

    speed = 40.0  # the hang detector's 300 s are 7.5 s here
    env = sim_env(speed=speed)
    model, sshd_port, http_port, sshd, hostfile = two_nodes(tmp_path, env)
    mpi = None
    base = f"http://127.0.0.1:{http_port}"

    def freeze(on: bool) -> None:  # what `docker pause` does to the remote rank's container
        os.kill(sshd.pid, signal.SIGSTOP if on else signal.SIGCONT)

    def active() -> int:
        stats = json.loads(_get(base, "/metrics")[1] or b"[]")
        return stats[-1]["numActiveRequests"] if stats else 0

    def in_background(max_tokens: int, timeout: float) -> tuple[threading.Thread, list]:
        out: list = []
        t = threading.Thread(target=lambda: out.append(_post(base, timeout, max_tokens)), daemon=True)
        t.start()
        return t, out

    try:
        timer = with_deadline([sshd], 90)
        assert read_until(sshd, "Server listening", [])
        mpi = start(mpirun_cmd(hostfile, sshd_port, model, http_port), env)
        timer2 = with_deadline([mpi, sshd], 90)
        seen: list[str] = []
        assert read_until(mpi, eng.READY_LINE, seen), "".join(seen)
        assert _post(base, 30)[0] == 200  # every step answered while the rank runs
        # frozen: the request is taken in and holds at its first step; /health (the HTTP server) answers 200
        freeze(True)
        t, out = in_background(8, 60)
        deadline = time.monotonic() + 30
        while active() != 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # a bounded poll of the engine's own counters, not a wait for time to pass
        assert active() == 1 and not out
        assert _get(base, "/health")[0] == 200
        freeze(False)  # back: the step completes and the request with it
        t.join(30)
        assert out and out[0][0] == 200, out
        # frozen past the hang detector's timeout: its line, the request in flight ends with an error, and a new
        # one gets no answer while /health still answers 200
        freeze(True)
        t, out = in_background(8, 60)
        assert read_until(mpi, "Hang detected after 300 seconds.", seen), "".join(seen[-20:])
        t.join(30)
        assert out and out[0][0] != 200, out
        assert _post(base, 2)[0] == 0
        assert _get(base, "/health")[0] == 200
        freeze(False)
        d = Diagnoser("trtllm")
        for line in "".join(seen).splitlines():
            d.feed(line)
        (p,) = [p for p in d.ordered_problems() if p.kind == "watchdog_timeout"]
        assert "no progress for 300 s" in p.message and "docker ps" in p.hint
        timer.cancel()
        timer2.cancel()
    finally:
        if sshd.poll() is None:
            os.kill(sshd.pid, signal.SIGCONT)
        stop(*(p for p in (mpi, sshd) if p is not None))
