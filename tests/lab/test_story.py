"""The deploy story on real nodes (sshd + dockerd in namespaces) with the engine simulator image.

SGLang on two nodes hangs at its rendezvous and is flagged with the SGLANG_HOST_IP hint; a pivot to
vLLM with Ray gets to ready and answers a chat completion through an SSH forward; redeploy serves
again; a launch killed midway is resumed without starting anything twice; `stop` spares containers
that are not this deployment's; a dropped management link loses no log line and doubles none.
The simulator runs fast (SPARKTUI_SIM_SPEED) and the hang watchdog is short, so each step takes seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktui.core.config.config import Config, load_config
from sparktui.core.deploy import Deployer
from sparktui.core.state.events import EventBus, LogLines
from sparktui.core.remote.ssh import Cluster
from tests.simhelpers import make_model

from .netlab import SIM_IMAGE, Lab

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
SPEED = "20"  # engine seconds per wall second: a vLLM start takes ~3 s, SGLang's watchdog 300 s takes 15 s
HANG_AFTER = 3  # seconds of silence in distributed init before the hang is flagged


@dataclass
class Story:
    lab: Lab
    path: Path
    config: Config
    state_home: Path

    @property
    def deployment(self) -> str:
        return self.config.cluster


@pytest.fixture(scope="module")
def story(lab: Lab, tmp_path_factory) -> Story:
    work = tmp_path_factory.mktemp("story")
    tar = work / "sim.tar"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_sim_image.py"), "-o", str(tar)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    lab.load_image(tar)
    for n in lab.nodes:
        make_model(n.path / "models" / lab.model, shards=4, total_bytes=2 * 1024**3)
    data = lab.config_data()
    # the simulator's SGLang publishes its queue on the wrong network, as SGLang does without SGLANG_HOST_IP
    data["docker"]["env"] = {"SPARKTUI_SIM_SPEED": SPEED, "SPARKTUI_SIM_SCENARIO": "sglang-host-ip"}
    data["engine"] = {"hang_after": HANG_AFTER}
    data["ssh"]["keepalive_interval"] = 1  # a dead link is noticed after ~3 s
    path = lab.write_config(data, work / "sparktui.yaml")
    s = Story(lab, path, load_config(path), work / "state")
    yield s
    cli(s, "stop", "--yes")
    lab.on_each("docker rm -f bystander other-deployment linkdrop-0 >/dev/null 2>&1; true")


def cli(s: Story, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", *args, "--config", str(s.path)],
        cwd=REPO,
        env=env_of(s),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return r.returncode, r.stdout, r.stderr


def cli_json(s: Story, *args: str, timeout: float = 120) -> tuple[int, dict, str]:
    rc, out, err = cli(s, *args, "--json", timeout=timeout)
    try:
        return rc, json.loads(out), err
    except ValueError:
        pytest.fail(f"`sparktui {' '.join(args)} --json` printed no JSON (exit {rc}):\n{out[-3000:]}\n{err[-3000:]}")


def env_of(s: Story) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
    env.update(XDG_STATE_HOME=str(s.state_home), PYTHONUNBUFFERED="1", COLUMNS="200")
    return env


def containers(lab: Lab, node: str, label: str = "sparktui.deployment") -> list[dict]:
    out = lab.sh(node, ["docker", "ps", "-a", "--filter", f"label={label}", "--format", "{{json .}}"]).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def names(lab: Lab, node: str) -> list[str]:
    return sorted(c["Names"] for c in containers(lab, node))


def ensure_vllm(s: Story) -> dict:
    """vLLM (Ray) serving, however the tests before left the nodes."""
    rc, doc, err = cli_json(s, "launch", "--engine", "vllm", "--yes", "--wait", "--no-preflight", "--timeout", "90")
    assert rc == 0 and doc["state"] == "ready", (doc.get("detail"), err[-2000:])
    return doc


async def chat_through_forward(config: Config, port: int) -> dict:
    async with Cluster(config) as cluster:
        local = await cluster[config.head.name].forward(port)
        body = json.dumps(
            {"model": config.model.name, "max_tokens": 16, "messages": [{"role": "user", "content": "Name a colour."}]}
        ).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{local}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return await asyncio.to_thread(lambda: json.loads(opener.open(req, timeout=30).read()))


def test_sglang_hangs_at_rendezvous_then_a_pivot_to_vllm_ray_serves_through_the_forward(story: Story):
    lab = story.lab
    rc, doc, err = cli_json(story, "launch", "--engine", "sglang", "--yes", "--wait", "--timeout", "60")
    assert rc == 1, err[-2000:]
    assert doc["state"] == "hung" and doc["engine"] == "sglang"
    assert doc["preflight"]["ok"] is True  # the fabric itself is fine: the hang is SGLang's own queue
    hangs = [p for p in doc["problems"] if p["kind"] == "rendezvous_hang"]
    assert {p["node"] for p in hangs} <= {"node1", "node2"} and hangs
    assert "SGLANG_HOST_IP" in hangs[0]["hint"] and "pivot to vLLM" in hangs[0]["hint"]
    assert [m["kind"] for m in doc["milestones"] if m["node"] == "node1"][:2] == [
        "container_started",
        "dist_init_begin",
    ]
    assert not any(m["kind"] == "dist_init_end" for m in doc["milestones"])
    # the plan did set SGLANG_HOST_IP to each node's fabric address; the engine ignored it (the scenario)
    for n in lab.nodes:
        [c] = containers(lab, n.name)
        env = lab.sh(n.name, ["docker", "inspect", "--format", "{{json .Config.Env}}", c["Names"]]).stdout
        assert f"SGLANG_HOST_IP={n.fabric_ip}" in json.loads(env)

    rc, doc, err = cli_json(story, "pivot", "--to", "vllm", "--yes", "--wait", "--timeout", "90")
    assert rc == 0, (doc.get("detail"), err[-2000:])
    assert (doc["state"], doc["engine"], doc["mode"]) == ("ready", "vllm", "ray")
    check = doc["check"]
    assert check["completion_tokens"] > 0 and check["latency_s"] > 0 and check["tokens_per_s"] > 0
    assert doc["endpoint"] == check["endpoint"] == f"http://{lab.head.mgmt_ip}:8000/v1"
    for n in lab.nodes:  # the SGLang containers are gone, one vLLM container per node
        assert [c.split("-")[-2] for c in names(lab, n.name)] == ["vllm"]
    # the same TP and network: the head's serve command says TP 2 and Ray runs on the fabric addresses
    top = lab.sh("node1", ["docker", "top", names(lab, "node1")[0], "-o", "pid,args"]).stdout
    assert "--tensor-parallel-size 2" in top and lab.head.fabric_ip in top

    answer = asyncio.run(chat_through_forward(story.config, 8000))
    assert answer["choices"][0]["message"]["content"] and answer["usage"]["completion_tokens"] > 0


def test_redeploy_starts_fresh_containers_and_serves_again(story: Story):
    lab = story.lab
    ensure_vllm(story)
    before = {c["ID"] for n in lab.nodes for c in containers(lab, n.name)}
    rc, doc, err = cli_json(story, "redeploy", "--yes", "--wait", "--timeout", "90")
    assert rc == 0 and doc["state"] == "ready", (doc.get("detail"), err[-2000:])
    after = {c["ID"] for n in lab.nodes for c in containers(lab, n.name)}
    assert len(after) == 2 and not before & after
    assert doc["engine"] == "vllm" and doc["check"]["completion_tokens"] > 0


def test_a_launch_killed_midway_then_run_again_starts_nothing_twice(story: Story):
    lab = story.lab
    rc, _, err = cli(story, "stop", "--yes")
    assert rc == 0, err
    argv = [
        sys.executable,
        "-m",
        "sparktui",
        "launch",
        "--engine",
        "vllm",
        "--yes",
        "--wait",
        "--no-preflight",
        "--timeout",
        "90",
        "--config",
        str(story.path),
    ]
    p = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env_of(story),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True).start()
    deadline = time.monotonic() + 60
    try:
        while True:  # kill it once the head container is up, before the rest of the launch
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line.startswith("[1/") and "done" in line:  # the first step (the head container) ran
                break
    finally:
        p.kill()
        p.wait(timeout=10)
    assert [c["Names"] for c in containers(lab, "node1")] == [f"sparktui-{story.deployment}-vllm-0"]

    rc, doc, err = cli_json(story, "launch", "--engine", "vllm", "--yes", "--wait", "--timeout", "90")
    assert rc == 0 and doc["state"] == "ready", (doc.get("detail"), err[-2000:])
    skipped = [(s["node"], s["kind"]) for s in doc["steps"] if s["state"] == "skipped"]
    assert ("node1", "run") in skipped
    assert "preflight" not in doc or doc["preflight"] is None  # a resumed launch does not re-check
    for n in lab.nodes:
        assert len(containers(lab, n.name)) == 1
    log = lab.sh("node1", ["docker", "logs", f"sparktui-{story.deployment}-vllm-0"]).stdout
    log += lab.sh("node1", ["docker", "logs", f"sparktui-{story.deployment}-vllm-0"]).stderr
    assert log.count("Starting vLLM API server") == 1 and "Address already in use" not in log


def test_replacing_a_running_deployment_asks_first_naming_what_stops_and_starts_where(story: Story):
    lab = story.lab
    ensure_vllm(story)
    before = {c["ID"] for n in lab.nodes for c in containers(lab, n.name)}
    dep = story.deployment
    for args in (("launch", "--engine", "sglang", "--no-preflight"), ("pivot",), ("redeploy",), ("stop",)):
        rc, out, err = cli(story, *args)  # no terminal to answer on, no --yes: nothing may change
        assert rc == 1, (args, err[-2000:])
        # node by node: what stops there, then what starts there (the core's one preview)
        assert f"node1:\n    stop  sparktui-{dep}-vllm-0" in err and f"node2:\n    stop  sparktui-{dep}-vllm-1" in err
        if args[0] in ("launch", "pivot"):
            # the preview's node headers end their line; the preflight's progress lines name nodes too
            assert f"    start sparktui-{dep}-sglang-0" in err.split("node1:\n")[1].split("node2:\n")[0], err
            assert f"    start sparktui-{dep}-sglang-1" in err.split("node2:\n")[1], err
        assert "--yes" in err
    assert {c["ID"] for n in lab.nodes for c in containers(lab, n.name)} == before


def test_stop_removes_this_deployment_and_leaves_other_containers_running(story: Story):
    lab = story.lab
    ensure_vllm(story)
    lab.sh("node1", ["docker", "run", "-d", "--name", "bystander", SIM_IMAGE, "sleep", "600"])
    lab.sh(
        "node2",
        [
            "docker",
            "run",
            "-d",
            "--name",
            "other-deployment",
            "--label",
            "sparktui.deployment=other",
            SIM_IMAGE,
            "sleep",
            "600",
        ],
    )
    rc, doc, err = cli_json(story, "stop", "--yes")
    assert rc == 0, err
    assert doc["removed"] == 2
    assert names(lab, "node1") == [] and names(lab, "node2") == ["other-deployment"]
    running = lab.sh("node1", ["docker", "ps", "--format", "{{.Names}}"]).stdout.split()
    assert running == ["bystander"]


async def wait_until(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


async def test_log_resumes_after_the_management_link_drops_with_no_line_lost_or_doubled(story: Story):
    lab = story.lab
    total = 600
    # numbered lines from a container carrying a deployment's labels; the stream is what is tested
    loop = f'i=0; while [ $i -lt {total} ]; do i=$((i+1)); echo "line $i"; sleep 0.03; done; sleep 600'
    lab.sh(
        "node2",
        [
            "docker",
            "run",
            "-d",
            "--name",
            "linkdrop-0",
            "--label",
            "sparktui.deployment=linkdrop",
            "--label",
            "sparktui.engine=vllm",
            "--label",
            "sparktui.rank=0",
            "--label",
            "sparktui.role=head",
            "--label",
            "sparktui.plan=numbered",
            SIM_IMAGE,
            "sh",
            "-c",
            loop,
        ],
    )
    got: list[str] = []
    bus = EventBus()
    bus.subscribe(lambda e: got.extend(e.lines) if isinstance(e, LogLines) and e.source == "linkdrop-0" else None)
    async with Cluster(story.config) as cluster:
        d = Deployer(cluster, story.config, bus, deployment="linkdrop", poll_interval=1)
        try:
            assert await d.reattach()
            await wait_until(lambda: len(got) >= 60, 30, "the first lines")
            lab.mgmt_link_down("node2")
            try:
                await wait_until(lambda: not cluster["node2"].connected, 20, "the link loss to be noticed")
                seen_down = len(got)
            finally:
                lab.mgmt_link_up("node2")
            await wait_until(lambda: f"line {total}" in got, 90, "the last line")
            passes = d.followers[("node2", "linkdrop-0")].passes
        finally:
            await d.close()
    assert seen_down < total  # the link really went down mid-stream
    assert passes >= 2  # and the follower resumed with --since
    assert got == [f"line {i}" for i in range(1, total + 1)]
