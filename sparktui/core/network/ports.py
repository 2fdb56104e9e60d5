"""Which TCP ports a plan needs on which node, and who already listens on them there.

One round trip per node: `ss -Hltnp` names the listening process; its cgroup names the docker
container it runs in, so a port held by another deployment's engine is named as that deployment.
A process `docker exec` started has no container cgroup where the engine runs without one (the demo's
nodes): its PID namespace, the same as the container's main process, still names the container.
Where `ss` is missing, /proc/net/tcp still tells that the port is taken (not by whom).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict, dataclass

from ..state import labels as L
from ..engines import runs_ray
from ..plan.plan import Plan
from ..nodes.probes import parse_docker_ps
from ..remote.ssh import Cluster

_SCRIPT = r"""echo @@ss; ss -Hltnp 2>/dev/null || echo @@noss
echo @@tcp; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null
for pid in $(ss -Hltnp 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
  echo "@@pid $pid cg=$(grep -o '[0-9a-f]\{64\}' /proc/$pid/cgroup 2>/dev/null | head -n 1) ns=$(readlink /proc/$pid/ns/pid 2>/dev/null)"
done
echo "@@cns self $(readlink /proc/$$/ns/pid 2>/dev/null)"
docker ps -q --no-trunc 2>/dev/null | xargs -r docker inspect -f '{{.Id}} {{.State.Pid}}' 2>/dev/null |
  while read -r id p; do echo "@@cns $id $(readlink /proc/$p/ns/pid 2>/dev/null)"; done
echo @@ps; docker ps --no-trunc --format '{{json .}}' 2>/dev/null
"""
_USER = re.compile(r'\("([^"]*)",pid=(\d+)')


@dataclass
class Holder:
    """A port the plan needs that is taken on a node, and what holds it."""

    node: str
    port: int
    what: str  # which of the plan's ports: HTTP port, dist port, ray port
    process: str | None = None  # e.g. python3 (pid 4242)
    container: str | None = None
    deployment: str | None = None  # when the container is another sparktui deployment's

    def holder(self) -> str:
        if self.deployment:
            return f"deployment {self.deployment} (container {self.container}, {self.process or 'its engine'})"
        if self.container:
            return f"container {self.container} ({self.process or 'a process in it'})"
        return self.process or "a process this user cannot name (run `ss -ltnp` there as root)"

    def sentence(self) -> str:
        flag = {"HTTP port": "--port", "dist port": "--dist-port", "ray port": "--ray-port"}.get(self.what, "--port")
        return (
            f"{self.node}: port {self.port} ({self.what}) is taken by {self.holder()}; stop it, or choose "
            f"another port ({flag}, or the form's field)"
        )

    def to_json(self) -> dict:
        return asdict(self)


def ports_of(plan: Plan) -> dict[str, dict[int, str]]:
    """node -> {port: what} the plan's engines listen on: the head serves HTTP and the rendezvous."""
    if not plan.nodes:
        return {}
    head = plan.nodes[0].name
    want = {plan.port: "HTTP port"}
    if runs_ray(plan.engine, plan.mode):
        want.setdefault(plan.ray_port, "ray port")
    else:
        want.setdefault(plan.dist_port, "dist port")
    return {head: want}


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith(("@@pid ", "@@cns ")):
            out.setdefault(line[2:5], []).append(line[6:])
        elif line.startswith("@@"):
            cur = line[2:].strip()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return out


def _port_of(addr: str) -> int | None:
    try:
        return int(addr.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


def parse_holders(node: str, text: str, want: dict[int, str], own: set[str]) -> list[Holder]:
    """Holders of the wanted ports from the script's output; own: container ids that do not count."""
    sec = _sections(text)
    cgroup, pidns = {}, {}
    for line in sec.get("pid", []):
        pid, _, rest = line.partition(" ")
        fields = dict(f.split("=", 1) for f in rest.split() if "=" in f)
        if fields.get("cg"):
            cgroup[pid] = fields["cg"]
        if fields.get("ns"):
            pidns[pid] = fields["ns"]
        if not fields and rest.strip():  # the older two-column form: pid and cgroup id
            cgroup[pid] = rest.strip()
    by_ns = {}  # PID namespace -> container id (a container's main process has its own)
    rows = [ln.split() for ln in sec.get("cns", [])]
    host_ns = {r[1] for r in rows if len(r) == 2 and r[0] == "self"}  # a --pid host container names no one
    for r in rows:
        if len(r) == 2 and r[0] != "self" and r[1] not in host_ns:
            by_ns.setdefault(r[1], r[0])
    containers = {c.id: c for c in parse_docker_ps("\n".join(sec.get("ps", [])))}
    found: dict[int, Holder] = {}
    if "noss" not in sec:
        for line in sec.get("ss", []):
            parts = line.split()
            port = _port_of(parts[3]) if len(parts) > 3 else None
            if port not in want or port in found:
                continue
            m = _USER.search(line)
            h = Holder(node, port, want[port])
            if m:
                h.process = f"{m[1]} (pid {m[2]})"
                cid = cgroup.get(m[2]) or by_ns.get(pidns.get(m[2], ""))
                c = next((c for i, c in containers.items() if cid and (i.startswith(cid) or cid.startswith(i))), None)
                if cid and cid in own or (c is not None and c.id in own):
                    continue
                if c is not None:
                    h.container, h.deployment = c.name, c.labels.get(L.DEPLOYMENT)
            elif own and any(c.state == "running" for i, c in containers.items() if i in own):
                continue  # cannot tell whose it is, and this deployment runs there: it is likely its own
            found[port] = h
    else:
        for line in sec.get("tcp", []):
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A" and ":" in parts[1]:
                try:
                    port = int(parts[1].rsplit(":", 1)[1], 16)
                except ValueError:
                    continue
                if port in want and port not in found and not own:
                    found[port] = Holder(node, port, want[port])
    return [found[p] for p in sorted(found)]


async def port_conflicts(cluster: Cluster, wanted: dict[str, dict[int, str]], own: set[str]) -> list[Holder]:
    """Every wanted port that something other than the containers in `own` listens on."""

    async def one(node: str, want: dict[int, str]) -> list[Holder]:
        r = await cluster[node].run(_SCRIPT, timeout=20)
        if not r.stdout:
            raise RuntimeError(f"{node}: {r.stderr.strip() or 'no answer'}")
        return parse_holders(node, r.stdout, want, own)

    results = await asyncio.gather(*(one(n, w) for n, w in wanted.items()))
    return [h for hs in results for h in hs]
