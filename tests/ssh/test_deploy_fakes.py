"""Stand-ins for the deploy tests of the fast tier (no tests here).

A `docker` script put on each in-process node's PATH keeps its containers as directories under the
node's own state dir, records every call (in order, across nodes) and replays a log file that the
test writes, with `docker logs -f -t --since` semantics: entries not before --since are printed.
The lab tier runs the real docker; this stand-in only has to be faithful about what the
orchestrator relies on (labels, names, states, log timestamps).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktui.core.config.config import Config, EngineDefaults, ModelConfig, NodeConfig, SshConfig
from sparktui.core.state.events import EventBus
from sparktui.core.nodes.facts import DockerInfo, Gpu, Memory, ModelDir, NodeAddr, NodeFacts, Subnet
from sparktui.core.plan.plan import Plan, PlanOptions, make_plan
from sparktui.demo.sshserver import LocalSshServer

IMAGE = "img/sim:1"
FABRIC = "10.250.100.0/24"
MGMT = "10.250.0.0/24"

FAKE_DOCKER = r"""#!PYTHON
import hashlib, json, os, sys, time
from calendar import timegm

D = os.environ["FAKE_DOCKER_DIR"]
CT = os.path.join(D, "containers")
os.makedirs(CT, exist_ok=True)
argv = sys.argv[1:]
with open(os.environ["FAKE_DOCKER_CALLS"], "a") as f:
    f.write(json.dumps({"node": os.environ.get("FAKE_NODE", "?"), "argv": argv, "t": time.time()}) + "\n")

def now_ts():
    t = time.time_ns()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 10**9)) + ".%09dZ" % (t % 10**9)

def key(ts):
    base, _, frac = ts.rstrip("Z").partition(".")
    return (timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")), int(frac.ljust(9, "0") or 0))

def load(ref):
    for name in os.listdir(CT):
        p = os.path.join(CT, name, "meta.json")
        try:
            m = json.load(open(p))
        except (OSError, ValueError):
            continue
        if ref in (m["name"], m["id"]) or (len(ref) >= 4 and m["id"].startswith(ref)):
            return m
    return None

def save(m):
    p = os.path.join(CT, m["name"], "meta.json")
    json.dump(m, open(p + ".tmp", "w"))
    os.replace(p + ".tmp", p)

def log(m, text):
    with open(os.path.join(CT, m["name"], "log"), "a") as f:
        f.write(now_ts() + " " + text + "\n")

def all_meta():
    out = []
    for name in sorted(os.listdir(CT)):
        try:
            out.append(json.load(open(os.path.join(CT, name, "meta.json"))))
        except (OSError, ValueError):
            pass
    return out

VALUED = {"--name", "--label", "--network", "--ipc", "--gpus", "--ulimit", "--cap-add", "--device", "-v",
          "--shm-size", "-e", "--env-file", "--runtime", "--filter", "--format", "-t", "--since", "--time", "-o"}

def opts(args, valued=VALUED):
    flags, rest, i = [], [], 0
    while i < len(args):
        a = args[i]
        if rest:
            rest.append(a)
        elif a in valued:
            flags.append((a, args[i + 1])); i += 1
        elif a.startswith("-") and a != "-":
            flags.append((a, None))
        else:
            rest.append(a)
        i += 1
    return flags, rest

def matches(m, filters):
    for f in filters:
        k, _, v = f.partition("=")
        if k != "label":
            continue
        lk, eq, lv = v.partition("=")
        if lk not in m["labels"] or (eq and m["labels"][lk] != lv):
            return False
    return True

cmd, args = (argv[0], argv[1:]) if argv else ("", [])
if cmd == "run":
    flags, rest = opts(args)
    name = dict(flags).get("--name")
    if load(name):
        print(f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use.', file=sys.stderr)
        sys.exit(125)
    labels = dict(v.split("=", 1) for k, v in flags if k == "--label")
    m = {"id": hashlib.sha256(f"{name}{time.time_ns()}".encode()).hexdigest(), "name": name, "image": rest[0],
         "labels": labels, "state": "running", "cmd": " ".join(rest[1:]), "procs": [], "exit": 0,
         "env": [v for k, v in flags if k == "-e"]
                + [ln for k, v in flags if k == "--env-file" for ln in open(v).read().splitlines()]}
    os.makedirs(os.path.join(CT, name))
    save(m)
    log(m, "fake: started " + m["cmd"])
    print(m["id"])
elif cmd == "ps":
    flags, _ = opts(args)
    filters = [v for k, v in flags if k == "--filter"]
    show_all = any(k in ("-a", "-aq", "-qa") for k, _ in flags)
    quiet = any(k in ("-q", "-aq", "-qa") for k, _ in flags)
    for m in all_meta():
        if (show_all or m["state"] == "running") and matches(m, filters):
            if quiet:
                print(m["id"])
            else:
                status = "Up 1 second" if m["state"] == "running" else f"Exited ({m['exit']}) 1 second ago"
                print(json.dumps({"ID": m["id"], "Names": m["name"], "Image": m["image"], "State": m["state"],
                                  "Status": status, "Labels": ",".join(f"{k}={v}" for k, v in m["labels"].items())}))
elif cmd in ("stop", "rm"):
    _, refs = opts(args)
    for ref in refs:
        m = load(ref)
        if m is None:
            print(f"Error: No such container: {ref}", file=sys.stderr)
            continue
        if cmd == "stop":
            m["state"] = "exited"; save(m)
        else:
            import shutil
            shutil.rmtree(os.path.join(CT, m["name"]))
        print(ref)
elif cmd == "inspect":
    flags, refs = opts(args)
    fmt = dict(flags).get("--format", "")
    m = load(refs[0])
    if m is None:
        print(f"Error: No such object: {refs[0]}", file=sys.stderr)
        sys.exit(1)
    print(fmt.replace("{{.State.Status}}", m["state"]).replace("{{.State.ExitCode}}", str(m["exit"]))
             .replace("{{.State.OOMKilled}}", "false").replace("{{json .Config.Labels}}", json.dumps(m["labels"])))
elif cmd == "logs":
    flags, refs = opts(args, VALUED - {"-t"})
    d = dict(flags)
    follow = "-f" in d
    since = key(d["--since"]) if "--since" in d else None
    m = load(refs[0])
    if m is None:
        print(f"Error: No such container: {refs[0]}", file=sys.stderr)
        sys.exit(1)
    path = os.path.join(CT, m["name"], "log")
    pos, deadline = 0, time.monotonic() + 120
    while time.monotonic() < deadline:
        with open(path) as f:
            f.seek(pos)
            chunk = f.read()
        if chunk:
            whole = chunk[: chunk.rfind("\n") + 1]
            pos += len(whole.encode())
            for line in whole.splitlines():
                ts = line.split(" ", 1)[0]
                if since is None or key(ts) >= since:
                    sys.stdout.write(line + "\n")
            sys.stdout.flush()
            continue
        m = load(refs[0])
        if not follow or m is None or m["state"] != "running":
            break
        time.sleep(0.02)
elif cmd == "exec":
    flags, rest = opts(args)
    m = load(rest[0])
    if m is None or m["state"] != "running":
        print(f"Error response from daemon: container {rest[0]} is not running", file=sys.stderr)
        sys.exit(1)
    inner = rest[1:]
    if ("-d", None) in flags:
        m["procs"].append(" ".join(inner)); save(m)
        log(m, "fake: exec " + " ".join(inner))
    elif inner[:2] == ["ray", "status"]:
        n = int(os.environ.get("FAKE_RAY_NODES", "2"))
        print("======== Autoscaler status ========\nNode status\nActive:")
        for i in range(n):
            print(f" 1 node_{i:040x}")
        print("Pending:\n (no pending nodes)")
elif cmd == "top":
    _, rest = opts(args)
    m = load(rest[0])
    if m is None:
        sys.exit(1)
    print("PID COMMAND")
    for i, p in enumerate([m["cmd"]] + m["procs"]):
        print(f"{100 + i} {p}")
else:
    print(f"fake docker: {cmd} not simulated", file=sys.stderr)
    sys.exit(2)
""".replace("PYTHON", sys.executable)


@dataclass
class FakeNode:
    name: str
    dir: Path
    server: LocalSshServer

    @property
    def containers(self) -> Path:
        return self.dir / "containers"

    def meta(self, name: str) -> dict:
        return json.loads((self.containers / name / "meta.json").read_text())

    def names(self) -> list[str]:
        return sorted(p.name for p in self.containers.iterdir()) if self.containers.exists() else []

    def set_state(self, name: str, state: str, exit_code: int = 0) -> None:
        m = self.meta(name)
        m["state"], m["exit"] = state, exit_code
        p = self.containers / name / "meta.json"
        p.with_suffix(".tmp").write_text(json.dumps(m))
        p.with_suffix(".tmp").replace(p)

    def write_log(self, name: str, *texts: str, ts: str | None = None) -> list[str]:
        """Append lines to a container's log, all with one timestamp (now unless given)."""
        stamp = ts or now_ts()
        with (self.containers / name / "log").open("a") as f:
            for t in texts:
                f.write(f"{stamp} {t}\n")
        return list(texts)

    def add_container(self, name: str, labels: dict[str, str], state: str = "running") -> None:
        """A container made outside sparktui (or by an earlier run)."""
        d = self.containers / name
        d.mkdir(parents=True)
        (d / "meta.json").write_text(
            json.dumps(
                {
                    "id": (name.encode().hex() * 8)[:64],
                    "name": name,
                    "image": IMAGE,
                    "labels": labels,
                    "state": state,
                    "cmd": "sleep",
                    "procs": [],
                    "exit": 0,
                    "env": [],
                }
            )
        )
        (d / "log").write_text("")


def now_ts() -> str:
    t = time.time_ns()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 10**9)) + ".%09dZ" % (t % 10**9)


@dataclass
class FakeCluster:
    config: Config
    nodes: list[FakeNode]
    calls_file: Path

    def calls(self) -> list[tuple[str, list[str]]]:
        if not self.calls_file.exists():
            return []
        return [(d["node"], d["argv"]) for d in map(json.loads, self.calls_file.read_text().splitlines())]

    def __getitem__(self, name: str) -> FakeNode:
        return next(n for n in self.nodes if n.name == name)


def facts_for(config: Config) -> tuple[dict[str, NodeFacts], list[Subnet]]:
    """Two GPU nodes on a RoCE fabric and a management net, with the image and the model present."""
    facts, fabric, mgmt = {}, {}, {}
    for i, n in enumerate(config.nodes):
        facts[n.name] = NodeFacts(
            name=n.name,
            host=n.host,
            reachable=True,
            gpu=Gpu(name="GB10", count=1, unified=True),
            memory=Memory(total_bytes=128 << 30, available_bytes=120 << 30),
            docker=DockerInfo(version="28.0", images={IMAGE: "sha256:" + "ab" * 32}),
            model=ModelDir(path=config.model.path, present=True, bytes=1 << 30, files=3),
        )
        fabric[n.name] = NodeAddr(iface=f"enp1s0f{i}np{i}", ip=f"10.250.100.{10 + i}", rdma=f"rocep1s0f{i}")
        mgmt[n.name] = NodeAddr(iface="enP7s7", ip=f"10.250.0.{10 + i}")
    return facts, [Subnet(FABRIC, fabric, rdma=True), Subnet(MGMT, mgmt, management=True)]


def plan_for(config: Config, opts: PlanOptions) -> Plan:
    facts, subnets = facts_for(config)
    return make_plan(config, facts, subnets, opts)


def planner_for(config: Config):
    async def planner(opts: PlanOptions) -> Plan:
        return plan_for(config, opts)

    return planner


@pytest.fixture
async def fake_cluster(tmp_path: Path, client_key):
    """Factory: n in-process nodes, each with the fake docker first on PATH and its own container dir."""
    servers: list[LocalSshServer] = []

    async def make(n: int = 2, hang_after: float = 90.0, ray_nodes: int | None = None) -> FakeCluster:
        import asyncssh

        key_path = tmp_path / "id_ed25519"
        key_path.write_bytes(client_key.export_private_key())
        key_path.chmod(0o600)
        kh = tmp_path / "known_hosts"
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        docker = bin_dir / "docker"
        docker.write_text(FAKE_DOCKER)
        docker.chmod(0o755)
        calls = tmp_path / "docker-calls.jsonl"
        nodes, fakes = [], []
        for i in range(n):
            name = f"n{i + 1}"
            home = tmp_path / name
            (home / "docker").mkdir(parents=True)
            env = {
                "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                "HOME": str(home),
                "FAKE_DOCKER_DIR": str(home / "docker"),
                "FAKE_DOCKER_CALLS": str(calls),
                "FAKE_NODE": name,
                "FAKE_RAY_NODES": str(ray_nodes if ray_nodes is not None else n),
            }
            hk = asyncssh.generate_private_key("ssh-ed25519")
            srv = await LocalSshServer(hk, [client_key], host="127.0.0.1", env=env).start()
            servers.append(srv)
            with kh.open("a") as f:
                f.write(f"[127.0.0.1]:{srv.port} {hk.export_public_key('openssh').decode()}")
            nodes.append(
                NodeConfig(
                    name=name,
                    host="127.0.0.1",
                    port=srv.port,
                    user="root",
                    identity_file=str(key_path),
                    role="head" if i == 0 else "worker",
                )
            )
            fakes.append(FakeNode(name, home / "docker", srv))
        ssh = SshConfig(known_hosts=str(kh), connect_timeout=3, ssh_config=[], keepalive_interval=2)
        cfg = Config(
            cluster="lab",
            nodes=nodes,
            model=ModelConfig(name="tiny", path="/models/tiny"),
            ssh=ssh,
            engine=EngineDefaults(hang_after=hang_after),
        )
        cfg.images.sglang = cfg.images.vllm = IMAGE
        return FakeCluster(cfg, fakes, calls)

    yield make
    import asyncio
    import contextlib

    async def channels_closed(s: LocalSshServer) -> None:
        deadline = time.monotonic() + 5
        while s.stats.open_channels and time.monotonic() < deadline:  # every command's handler has ended
            await asyncio.sleep(0.02)

    for s in servers:
        # first the commands whose client has gone end on their own: a log follower's shell sees its stdin
        # close and stops the follower it started under setsid; a kill of its group would leave that
        # follower holding the pipes (and the reaping below waiting its 5 s out)
        await channels_closed(s)
        procs = list(s._procs)
        await s.stop()  # also kills the stand-in processes a follower left behind
        for p in procs:  # reap them while the loop still runs
            with contextlib.suppress(Exception):
                await asyncio.wait_for(p.wait(), 5)
        await channels_closed(s)


class Recorder:
    """Every event the bus carries, in order; `wait_for` blocks (bounded) until one matches."""

    def __init__(self, bus: EventBus):
        import asyncio

        self.events: list = []
        self._changed = asyncio.Event()
        bus.subscribe(self._on)

    def _on(self, e) -> None:
        self.events.append(e)
        self._changed.set()

    def of(self, cls) -> list:
        return [e for e in self.events if isinstance(e, cls)]

    async def wait_for(self, pred, timeout: float = 10.0):
        import asyncio

        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if pred(e):
                    return e
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching event within {timeout} s; got {self.events[-10:]!r}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                pass
