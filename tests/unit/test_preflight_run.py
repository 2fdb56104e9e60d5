"""run_preflight end to end without root: in-process SSH servers on 127.0.0.1 as nodes, a stand-in
`docker` that runs the container's command as a local process (and kills it on `docker rm -f`), and a
stand-in `ip` per node, so the ranks meet on 127.0.0.2 and 127.0.0.3 through the real check program."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import asyncssh
import pytest

from sparktui.core.config.config import Config, ModelConfig, NodeConfig, SshConfig
from sparktui.core.state.journal import MASK
from sparktui.core.plan.plan import NodePlan, Plan
from sparktui.core.preflight import PreflightError, run_preflight
from sparktui.core.preflight import runner
from sparktui.core.remote.ssh import Cluster
from sparktui.demo.sshserver import LocalSshServer

FAKE_DOCKER = r"""#!PYTHON
import json, os, signal, subprocess, sys
state = os.environ["FAKE_STATE"]
args = sys.argv[1:]
with open(os.path.join(state, "docker.log"), "a") as f:
    f.write(json.dumps({"node": os.environ["FAKE_NODE"], "args": args}) + "\n")
if args[:2] == ["image", "inspect"]:
    if os.environ.get("FAKE_NO_IMAGE"):
        sys.stderr.write("Error: No such image: %s\n" % args[-1])
        sys.exit(1)
    print("sha256:" + "ab" * 32)
    sys.exit(0)
if args[:1] == ["rm"]:
    for name in args[2:]:
        pf = os.path.join(state, name + ".pid")
        if os.path.exists(pf):
            try:
                os.killpg(int(open(pf).read()), signal.SIGKILL)
            except OSError:
                pass
    sys.exit(0)
if args[:1] == ["run"]:
    if os.environ.get("FAKE_RUN_ERROR"):
        sys.stderr.write(os.environ["FAKE_RUN_ERROR"] + "\n")
        sys.exit(125)
    if os.environ.get("FAKE_HOLD"):  # a slow start: the daemon answers once the test writes to this fifo
        with open(os.path.join(state, "held-" + os.environ["FAKE_NODE"]), "w") as f:
            f.write(str(os.getpid()))
        open(os.environ["FAKE_HOLD"]).read()
    valued = {"--name", "--label", "--network", "--ipc", "--gpus", "--ulimit", "--cap-add", "--device", "-v",
              "--shm-size", "-e", "--runtime"}
    i, name, env = 1, None, dict(os.environ)
    while args[i].startswith("-"):
        if args[i] in valued:
            if args[i] == "--name":
                name = args[i + 1]
            elif args[i] == "-e":
                k, _, v = args[i + 1].partition("=")
                env[k] = v
            i += 2
        else:
            i += 1
    cmd = [sys.executable if args[i + 1] == "python3" else args[i + 1]] + args[i + 2:]
    if os.environ.get("FAKE_ADDR"):  # this node's packets go elsewhere (a wrong route, say)
        cmd[cmd.index("--addr") + 1] = os.environ["FAKE_ADDR"]
    p = subprocess.Popen(cmd, env=env, start_new_session=True)
    pf = os.path.join(state, name + ".pid")
    with open(pf, "w") as f:
        f.write(str(p.pid))
    code = p.wait()
    os.unlink(pf)
    sys.exit(code if code >= 0 else 128 - code)
sys.exit(2)
"""


def ip_json(ips: list[str]) -> str:
    return json.dumps(
        [
            {
                "ifname": "lo",
                "flags": ["LOOPBACK", "UP", "LOWER_UP"],
                "operstate": "UNKNOWN",
                "addr_info": [{"family": "inet", "local": ip, "prefixlen": 8} for ip in ips],
            }
        ]
    )


@pytest.fixture
async def nodes(tmp_path: Path):
    """Factory: two nodes; per-node env changes (FAKE_NO_IMAGE, FAKE_RUN_ERROR) as keyword dicts."""
    state = tmp_path / "state"
    state.mkdir()
    common = tmp_path / "bin"
    common.mkdir()
    (common / "docker").write_text(FAKE_DOCKER.replace("PYTHON", sys.executable))
    (common / "docker").chmod(0o755)
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    key_path = tmp_path / "id"
    key_path.write_bytes(client_key.export_private_key())
    key_path.chmod(0o600)
    kh = tmp_path / "known_hosts"
    servers: list[LocalSshServer] = []

    async def make(**per_node: dict) -> tuple[Config, Path]:
        confs = []
        for i, ip in enumerate(("127.0.0.2", "127.0.0.3")):
            name = f"node{i + 1}"
            nbin = tmp_path / f"bin-{name}"
            nbin.mkdir(exist_ok=True)
            (nbin / "ip").write_text(f"#!/bin/sh\ncat <<'EOF'\n{ip_json(['127.0.0.1', ip])}\nEOF\n")
            (nbin / "ip").chmod(0o755)
            env = {"PATH": f"{nbin}:{common}:{os.environ['PATH']}", "FAKE_STATE": str(state), "FAKE_NODE": name}
            env.update(per_node.get(name, {}))
            hk = asyncssh.generate_private_key("ssh-ed25519")
            srv = await LocalSshServer(hk, [client_key], host="127.0.0.1", env=env).start()
            servers.append(srv)
            with kh.open("a") as f:
                f.write(f"[127.0.0.1]:{srv.port} {hk.export_public_key('openssh').decode()}")
            confs.append(
                NodeConfig(
                    name=name,
                    host="127.0.0.1",
                    port=srv.port,
                    user="root",
                    identity_file=str(key_path),
                    role="head" if i == 0 else "worker",
                )
            )
        cfg = Config(
            cluster="t",
            nodes=confs,
            model=ModelConfig(name="m", path="/models/m"),
            ssh=SshConfig(known_hosts=str(kh), connect_timeout=3, ssh_config=[]),
        )
        return cfg, state

    yield make
    for s in servers:
        await s.stop()
    for pid in leftovers(state):  # a test that failed must not leave its check processes behind
        os.killpg(pid, signal.SIGKILL)


def make_plan(**env_per_node) -> Plan:
    dist = random.randrange(41000, 59000)
    nodes = []
    for rank, ip in enumerate(("127.0.0.2", "127.0.0.3")):
        name = f"node{rank + 1}"
        env = {"NCCL_SOCKET_IFNAME": "lo", "SGLANG_HOST_IP": ip, "NCCL_DEBUG": "INFO", "HF_TOKEN": MASK}
        env.update(env_per_node.get(name, {}))
        nodes.append(
            NodePlan(
                name=name,
                rank=rank,
                role="head" if rank == 0 else "worker",
                iface="lo",
                ip=ip,
                rdma=None,
                container=f"sparktui-t-sglang-{rank}",
                env=env,
            )
        )
    return Plan(
        engine="sglang",
        mode="native",
        image="repo/engine:1",
        model_path="/models/m",
        served_model_name="m",
        tp=2,
        pp=1,
        deployment="t",
        subnet="127.0.0.0/8",
        head_ip="127.0.0.2",
        dist_port=dist,
        port=30000,
        ray_port=6379,
        nodes=nodes,
    )


def docker_calls(state: Path) -> list[dict]:
    path = state / "docker.log"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def leftovers(state: Path, within: float = 5.0) -> list[int]:
    """Check processes still alive (by the pid files the stand-in docker keeps while one runs). A process
    killed a moment ago may not have died yet (SIGKILL is delivered asynchronously; its parent reaps it
    later): wait for that, within a bound, before calling it left behind. A zombie is dead."""
    deadline = time.monotonic() + within
    while True:
        found = []
        for pf in state.glob("*.pid"):
            try:
                pid = int(pf.read_text())
            except (OSError, ValueError):
                continue
            if alive(pid):
                found.append(pid)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)  # polling a condition, bounded by the deadline above


async def test_two_nodes_meet_and_nothing_is_left(nodes):
    config, state = await nodes()
    plan = make_plan()
    seen = []
    async with Cluster(config) as cluster:
        v = await run_preflight(cluster, config, plan, timeout=10, on_node=seen.append)
    assert v.ok, v.summary()
    assert sorted(r.node for r in seen) == ["node1", "node2"]
    assert v.transport == "tcp" and v.bandwidth_gb_s > 0
    assert plan.dist_port < v.setting.port <= plan.dist_port + 200  # a free port near the dist port
    assert any("TCP reachability" in w for w in v.warnings)
    runs = [c for c in docker_calls(state) if c["args"][0] == "run"]
    assert len(runs) == 2
    for c in runs:
        args = c["args"]
        assert args[:5] == [
            "run",
            "--rm",
            "-i",
            "--name",
            f"sparktui-preflight-{v.check_id}-r{0 if c['node'] == 'node1' else 1}",
        ]
        assert "NCCL_SOCKET_IFNAME=lo" in args and "--gpus" in args
        assert not any("HF_TOKEN" in a for a in args)
    rms = [c for c in docker_calls(state) if c["args"][:2] == ["rm", "-f"]]
    assert {c["node"] for c in rms} == {"node1", "node2"}  # the sweep ran on every node that started one
    assert leftovers(state) == []
    j = v.to_json()
    assert j["ok"] and j["rendezvous"] == {"addr": "127.0.0.2", "port": v.setting.port, "subnet": "127.0.0.0/8"}


async def test_a_node_that_fails_on_its_own_stops_the_others_early(nodes):
    err = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
    config, state = await nodes(node2={"FAKE_RUN_ERROR": err})
    t0, seen = time.monotonic(), []
    async with Cluster(config) as cluster:
        v = await run_preflight(cluster, config, make_plan(), timeout=20, on_node=seen.append)
    took = time.monotonic() - t0
    assert not v.ok
    assert took < runner.EARLY_GRACE + 8  # not the 20 s the head would wait for its peer
    assert v.root.node == "node2" and v.root.kind == "docker"
    assert "could not select device driver" in v.reason and "gpu_style" in v.fix
    assert v.nodes["node1"].kind == "stopped"
    assert [(r.node, r.kind) for r in seen] == [("node2", "docker"), ("node1", "stopped")]  # as they came
    assert leftovers(state) == []


async def test_a_missing_image_fails_before_any_container(nodes):
    config, state = await nodes(node2={"FAKE_NO_IMAGE": "1"})
    async with Cluster(config) as cluster:
        v = await run_preflight(cluster, config, make_plan(), timeout=10)
    assert (v.root.node, v.root.kind) == ("node2", "image_missing")
    assert "repo/engine:1" in v.reason and "sparktui sync image" in v.fix
    assert v.nodes["node1"].kind == "skipped"
    assert not [c for c in docker_calls(state) if c["args"][0] == "run"]


async def test_a_forced_interface_the_node_lacks_fails_before_any_container(nodes):
    config, state = await nodes()
    plan = make_plan(node2={"NCCL_SOCKET_IFNAME": "doesnotexist0"})
    async with Cluster(config) as cluster:
        v = await run_preflight(cluster, config, plan, timeout=10)
    assert (v.root.node, v.root.kind) == ("node2", "interface_missing")
    assert "NCCL_SOCKET_IFNAME=doesnotexist0" in v.reason and "--iface" in v.fix
    assert v.seconds < 5
    assert not [c for c in docker_calls(state) if c["args"][0] == "run"]


async def test_a_plan_without_a_rendezvous_is_refused(nodes):
    config, _ = await nodes()
    plan = make_plan()
    plan.head_ip = None
    async with Cluster(config) as cluster:
        with pytest.raises(PreflightError, match="no rendezvous address"):
            await run_preflight(cluster, config, plan)


async def test_cancelling_the_check_still_removes_its_containers(nodes):
    # node2's traffic goes to an address where nobody listens, so both ranks keep waiting until cancelled
    config, state = await nodes(node2={"FAKE_ADDR": "127.0.0.9"})
    async with Cluster(config) as cluster:
        task = asyncio.create_task(run_preflight(cluster, config, make_plan(), timeout=30))
        deadline = time.monotonic() + 20
        while len(list(state.glob("*.pid"))) < 2 and time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.05)  # polling a condition, bounded by the deadline above
        assert len(list(state.glob("*.pid"))) == 2, "both checks should be running"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert leftovers(state) == []
    assert {c["node"] for c in docker_calls(state) if c["args"][:2] == ["rm", "-f"]} == {"node1", "node2"}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:  # gone, or gone between the two looks
        return False


async def test_a_container_that_never_starts_gets_its_own_verdict_and_is_killed(nodes, tmp_path):
    hold = tmp_path / "hold"
    os.mkfifo(hold)  # nobody ever writes: node2's container never starts
    config, state = await nodes(node2={"FAKE_HOLD": str(hold)})
    stages: list[tuple[str, str]] = []
    async with Cluster(config) as cluster:
        v = await run_preflight(
            cluster, config, make_plan(), timeout=20, start_window=2, on_stage=lambda *a: stages.append(a)
        )
    assert (v.root.node, v.root.kind) == ("node2", "not_started")
    assert v.reason.startswith("the container did not start within 2 s on node2")
    assert "--iface" not in v.fix and "subnet" not in v.fix and "sparktui sync image" in v.fix
    assert v.nodes["node1"].kind == "stopped"  # not blamed for the peer it could not meet
    assert v.seconds < 2 + runner.EARLY_GRACE + 8  # not node1's 20 s
    assert ("node2", "starting") in stages and ("node2", "rendezvous") not in stages
    assert stages.index(("node1", "starting")) < stages.index(("node1", "rendezvous"))
    assert not alive(int((state / "held-node2").read_text()))  # the held `docker run` was killed
    assert leftovers(state) == []


async def test_the_timeout_counts_from_the_program_not_from_docker_run(nodes, tmp_path, monkeypatch):
    # Both starts are held longer than the whole budget the old single timeout gave (timeout + slack).
    monkeypatch.setattr(runner, "START_SLACK", 0.5)
    holds = {n: tmp_path / f"hold-{n}" for n in ("node1", "node2")}
    for h in holds.values():
        os.mkfifo(h)
    config, state = await nodes(**{n: {"FAKE_HOLD": str(h)} for n, h in holds.items()})
    both_waiting = asyncio.Event()
    waiting: set[str] = set()

    def stage(node: str, what: str) -> None:
        if what == "starting":
            waiting.add(node)
            if len(waiting) == 2:
                both_waiting.set()

    def release(h: Path) -> None:
        with open(h, "w"):  # opens once the held start reads it; closing lets it go
            pass

    async def slow_start() -> None:
        await both_waiting.wait()
        await asyncio.sleep(3)  # the simulated slow start itself (longer than timeout + slack), not a sync
        await asyncio.gather(*(asyncio.to_thread(release, h) for h in holds.values()))

    async with Cluster(config) as cluster:
        releasing = asyncio.create_task(slow_start())
        v = await run_preflight(cluster, config, make_plan(), timeout=2, start_window=30, on_stage=stage)
        await releasing
    assert v.ok, v.summary()
    assert all(r.start_seconds is not None and r.start_seconds >= 3 for r in v.nodes.values())
    assert leftovers(state) == []
