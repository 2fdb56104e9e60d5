"""A frozen worker stalls the simulated head mid-serving, as tensor parallelism does, and the engines' own
timeouts end it as the real ones do. Two loopback "nodes" (127.0.0.2 head, 127.0.0.3 worker); the worker is
frozen with SIGSTOP on its process group, what `docker pause` does to a container (the cgroup freezer).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading

import pytest

from sparktui.cli import main
from sparktui.core.diagnosis.diagnose import Diagnoser
from tests.simhelpers import SimProcess, free_port, http, launcher_argv, make_model, module_argv

SPEED = 50
READY_VLLM = "Application startup complete."
READY_SGLANG = "The server is fired up and ready to roll!"
# vLLM's stats line with no token generated over its interval while a request runs and one waits
STALLED_STATS = re.compile(r"Avg generation throughput: 0\.0 tokens/s, Running: [1-9]\d* reqs, Waiting: [1-9]\d* reqs")
SHM_WAIT = re.compile(r"\[shm_broadcast\.py:\d+\] No available shared memory broadcast block found in 60 seconds\. ")


@pytest.fixture
def model(tmp_path):
    return str(make_model(tmp_path / "qwen", shards=4))


def vllm_pair(model: str, tmp_path, env=None, speed=SPEED, scenarios=()):
    master, port = free_port("127.0.0.2"), free_port("127.0.0.2")
    common = ["serve", model, "-tp", "2", "--nnodes", "2", "--master-addr", "127.0.0.2", "--master-port", str(master)]
    extra = dict(env or {}, TMPDIR=str(tmp_path))
    worker = SimProcess(
        launcher_argv("vllm", *common, "--node-rank", "1", "--headless"),
        speed=speed,
        scenarios=scenarios,
        extra_env=dict(extra, VLLM_HOST_IP="127.0.0.3"),
    )
    head = SimProcess(
        launcher_argv("vllm", *common, "--node-rank", "0", "--host", "127.0.0.2", "--port", str(port)),
        speed=speed,
        scenarios=scenarios,
        extra_env=dict(extra, VLLM_HOST_IP="127.0.0.2"),
    )
    return head, worker, f"http://127.0.0.2:{port}"


def sglang_pair(model: str, extra=(), speed=SPEED, scenarios=()):
    dist, port = free_port("127.0.0.2"), free_port("127.0.0.2")
    common = [
        "--model-path",
        model,
        "--tp",
        "2",
        "--nnodes",
        "2",
        "--dist-init-addr",
        f"127.0.0.2:{dist}",
        "--enable-metrics",
        *extra,
    ]
    worker = SimProcess(
        module_argv("sglang.launch_server", *common, "--node-rank", "1"),
        speed=speed,
        scenarios=scenarios,
        extra_env={"SGLANG_HOST_IP": "127.0.0.3"},
    )
    head = SimProcess(
        module_argv("sglang.launch_server", *common, "--node-rank", "0", "--host", "127.0.0.2", "--port", str(port)),
        speed=speed,
        scenarios=scenarios,
        extra_env={"SGLANG_HOST_IP": "127.0.0.2"},
    )
    return head, worker, f"http://127.0.0.2:{port}"


def freeze(p: SimProcess, on: bool) -> None:
    assert p.proc is not None
    os.killpg(p.proc.pid, signal.SIGSTOP if on else signal.SIGCONT)


class Request(threading.Thread):
    """One completion in the background; `result` is (status, body) once it ends, (0, reason) when the
    connection broke (the engine process exited under it)."""

    def __init__(self, base: str, max_tokens: int = 40, timeout: float = 60) -> None:
        super().__init__(daemon=True)
        self.base, self.max_tokens, self.timeout = base, max_tokens, timeout
        self.result: tuple[int, bytes] | None = None

    def run(self) -> None:
        try:
            self.result = self._post()
        except OSError as e:  # http.client's RemoteDisconnected is a ConnectionResetError
            self.result = (0, str(e).encode())

    def _post(self) -> tuple[int, bytes]:
        return http(
            "POST",
            f"{self.base}/v1/completions",
            {"prompt": "Explain tensor parallelism.", "max_tokens": self.max_tokens, "ignore_eos": True},
            timeout=self.timeout,
        )


def series(base: str, name: str) -> float:
    """The sum of one metric's samples on /metrics."""
    text = http("GET", f"{base}/metrics")[1].decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def test_a_frozen_worker_stalls_vllm_while_health_answers_then_tokens_flow_again(model, tmp_path):
    # what a real vLLM showed with a TP rank SIGSTOPped (tests/corpus/vllm_cpu_tp2_frozen_rank_wedged.log): requests
    # sent meanwhile never show in the gauges (the engine core publishes stats only with a finished step), the
    # counter stays flat, /health answers, and the engine core says every 60 s that it waits for a worker
    head, worker, base = vllm_pair(model, tmp_path, env={"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "100000"})
    with worker, head:
        head.wait_for(READY_VLLM, timeout=60)
        assert http("POST", f"{base}/v1/completions", {"prompt": "hi", "max_tokens": 8})[0] == 200
        tokens = series(base, "vllm:generation_tokens_total")
        freeze(worker, True)
        try:
            mark = len(head.snapshot())
            first = Request(base, max_tokens=4000)
            first.start()
            second = Request(base)
            second.start()
            head.wait_for(SHM_WAIT, timeout=30, start=mark)  # 60 engine seconds into the stalled step
            assert http("GET", f"{base}/health")[0] == 200  # the API process does not know
            assert series(base, "vllm:num_requests_running") == 0 and series(base, "vllm:num_requests_waiting") == 0
            again = head.wait_for(SHM_WAIT, timeout=30, start=head.find(SHM_WAIT, mark) + 1)  # and 60 s later
            stalled = head.snapshot()[: again + 1]
            assert series(base, "vllm:generation_tokens_total") == tokens  # flat all along
            assert first.result is None and second.result is None
            assert head.find(STALLED_STATS, mark) < 0  # its stats line never shows them either
        finally:
            freeze(worker, False)
        second.join(60)
        assert second.result is not None and second.result[0] == 200
        assert series(base, "vllm:generation_tokens_total") > tokens
        assert head.find("fatal error") < 0
    d = Diagnoser("vllm")
    for line in stalled:
        d.feed(line)
    assert d.state == "wedged"  # the log read up to the second wait


def test_vllm_gives_up_after_its_execute_model_timeout_and_its_api_server_ends(model, tmp_path):
    head, worker, base = vllm_pair(model, tmp_path, env={"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "120"})
    with worker, head:
        head.wait_for(READY_VLLM, timeout=60)
        freeze(worker, True)
        try:
            req = Request(base, max_tokens=4000)
            req.start()
            head.wait_for("TimeoutError: RPC call to execute_model timed out.", timeout=30)
            req.join(30)
            assert req.result is not None and req.result[0] == 500  # the request in flight gets the engine's error
            # as vllm-cpu 0.32.0 did once its engine core died: the API server shuts down and the process ends
            assert head.wait_exit(timeout=30) == 0
        finally:
            freeze(worker, False)
        lines = head.snapshot()
        ends = [line.split("INFO:     ", 1)[-1] for line in lines[-4:]]
        assert ends[:3] == ["Shutting down", "Waiting for application shutdown.", "Application shutdown complete."]
        assert ends[3].startswith("Finished server process [")
        fatal = next(i for i, line in enumerate(lines) if "EngineCore encountered a fatal error." in line)
        assert "multiproc_executor.py" in "\n".join(lines[fatal:])
    d = Diagnoser("vllm")
    for line in lines:
        d.feed(line)
    d.finish()
    assert d.state == "failed"


def test_a_frozen_sglang_worker_stalls_the_head_until_the_scheduler_watchdog(model):
    head, worker, base = sglang_pair(model, extra=("--watchdog-timeout", "200"))
    with worker, head:
        head.wait_for(READY_SGLANG, timeout=60)
        freeze(worker, True)
        try:
            req = Request(base, max_tokens=4000)
            req.start()
            mark = len(head.snapshot())
            assert http("GET", f"{base}/health")[0] == 200
            head.wait_for(
                "Scheduler watchdog timeout (self.watchdog_timeout=200, self.soft=False)", timeout=30, start=mark
            )
            assert head.wait_exit(timeout=30) == 137
        finally:
            freeze(worker, False)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_collective_timeout_scenario_ends_serving_with_torch_s_watchdog_and_diagnose_names_it(
    engine, model, tmp_path, capsys
):
    if engine == "vllm":
        head, worker, base = vllm_pair(model, tmp_path, speed=400, scenarios=("collective-timeout",))
        ready = READY_VLLM
    else:
        head, worker, base = sglang_pair(model, speed=400, scenarios=("collective-timeout",))
        ready = READY_SGLANG
    with worker, head:
        head.wait_for(ready, timeout=60)
        req = Request(base, max_tokens=100000)
        req.start()
        head.wait_for(
            "Terminating the process after attempting to dump debug info, due to collective timeout", timeout=60
        )
        req.join(30)
        # the request in flight gets the engine's error (vLLM), or loses its connection as SGLang exits
        assert req.result is not None and req.result[0] == (500 if engine == "vllm" else 0)
        if engine == "sglang":
            assert head.wait_exit(timeout=30) == 134
        lines = head.snapshot()
    d = Diagnoser(engine)
    for line in lines:
        d.feed(line)
    d.finish()
    assert d.state == "failed"
    (p,) = [p for p in d.ordered_problems() if p.kind == "watchdog_timeout"]
    assert p.message.startswith("collective timeout on rank 0:") and p.message.endswith("while serving"), p.message
    assert "NCCL ALLREDUCE did not finish within 600 s" in p.message
    # `sparktui diagnose` on the saved log says the same
    log = tmp_path / "head.log"
    log.write_text("\n".join(lines) + "\n")
    assert main(["diagnose", "--engine", engine, "--json", str(log)]) != 0
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "failed"
    assert any(q["kind"] == "watchdog_timeout" and q["message"] == p.message for q in out["problems"]), out


def test_a_frozen_ray_worker_node_is_marked_dead_by_the_gcs_and_vllm_dies_with_its_actor(model, tmp_path):
    head_tmp, worker_tmp = tmp_path / "head", tmp_path / "worker"
    head_tmp.mkdir()
    worker_tmp.mkdir()
    gcs, port = free_port("127.0.0.2"), free_port("127.0.0.2")

    def ray(tmpdir, *args: str) -> SimProcess:
        return SimProcess(launcher_argv("ray", *args), speed=SPEED, extra_env={"TMPDIR": str(tmpdir)})

    head = ray(head_tmp, "start", "--head", "--node-ip-address", "127.0.0.2", "--port", str(gcs), "--block")
    worker = ray(worker_tmp, "start", "--address", f"127.0.0.2:{gcs}", "--node-ip-address", "127.0.0.3", "--block")
    server = SimProcess(
        launcher_argv(
            "vllm",
            "serve",
            model,
            "--tensor-parallel-size",
            "2",
            "--distributed-executor-backend",
            "ray",
            "--host",
            "127.0.0.2",
            "--port",
            str(port),
        ),
        speed=SPEED,
        # the switch that keeps a dead engine's API server up: /health then answers 503
        extra_env={"TMPDIR": str(head_tmp), "VLLM_HOST_IP": "127.0.0.2", "VLLM_KEEP_ALIVE_ON_ENGINE_DEATH": "1"},
    )
    base = f"http://127.0.0.2:{port}"
    with head:
        head.wait_for("This command will now block forever", timeout=30)
        with worker:
            worker.wait_for("Ray runtime started.", timeout=30)
            with server:
                server.wait_for(READY_VLLM, timeout=60)
                assert http("POST", f"{base}/v1/completions", {"prompt": "hi", "max_tokens": 8})[0] == 200
                freeze(worker, True)  # the worker's raylet and its actor: the node stops answering
                try:
                    req = Request(base, max_tokens=4000)
                    req.start()
                    assert http("GET", f"{base}/health")[0] == 200
                    # Ray's health checks miss five times in a row (~65 engine s): the node is dead
                    server.wait_for(
                        "has been marked dead because the detector has missed too many heartbeats", timeout=30
                    )
                    server.wait_for("ray.exceptions.ActorDiedError: The actor died unexpectedly", timeout=30)
                    req.join(30)
                    assert req.result is not None and req.result[0] == 500
                    assert http("GET", f"{base}/health")[0] == 503
                finally:
                    freeze(worker, False)
                lines = server.snapshot()
    d = Diagnoser("vllm")
    for line in lines:
        d.feed(line)
    d.finish()
    assert d.state == "failed" and any(p.kind == "engine_died" for p in d.problems)
