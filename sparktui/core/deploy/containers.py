"""Which containers belong to a deployment, found by label only, and removing exactly those.

Every engine container sparktui starts carries labels (engines/common.py): sparktui.deployment,
.engine, .role, .rank and .plan (the plan's hash). Nothing here touches a container without them.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from ..state import labels as L
from ..nodes.facts import Container
from ..nodes.probes import parse_docker_ps
from ..remote.ssh import Cluster, Node, script

LABEL = L.DEPLOYMENT
STOP_GRACE_S = 10  # docker stop -t: engines flush and release the GPU on SIGTERM


@dataclass
class Found:
    """A node's containers of one deployment, or why the node could not be asked."""

    node: str
    containers: list[Container]
    error: str | None = None

    @property
    def running(self) -> list[Container]:
        return [c for c in self.containers if c.state == "running"]


def ps_argv(deployment: str | None) -> list[str]:
    flt = f"{LABEL}={deployment}" if deployment else LABEL
    return ["docker", "ps", "-a", "--no-trunc", "--filter", f"label={flt}", "--format", "{{json .}}"]


async def find_on(node: Node, deployment: str | None) -> Found:
    """Containers labelled with `deployment` (any deployment when None) on one node."""
    r = await node.run(ps_argv(deployment), timeout=30)
    if not r.ok:
        return Found(node.name, [], r.stderr.strip() or f"docker ps exited {r.exit_status}")
    # The filter is docker's; checking the label here too keeps a misreading docker from widening it.
    found = [
        c
        for c in parse_docker_ps(r.stdout)
        if c.labels.get(LABEL) and (deployment is None or c.labels.get(LABEL) == deployment)
    ]
    return Found(node.name, found)


async def find_all(cluster: Cluster, deployment: str | None, nodes: list[str] | None = None) -> dict[str, Found]:
    names = nodes or list(cluster.nodes)
    results = await asyncio.gather(*(find_on(cluster[n], deployment) for n in names))
    return {f.node: f for f in results}


def remove_command(deployment: str, grace: int = STOP_GRACE_S) -> str:
    """Stop, then remove, the containers carrying this deployment's label; prints what it removed."""
    return script(
        'ids=$(docker ps -aq --no-trunc --filter label={flt}); [ -z "$ids" ] && exit 0; '
        "docker stop -t {grace} $ids >/dev/null 2>&1; docker rm -f $ids",
        flt=f"{LABEL}={deployment}",
        grace=grace,
    )


async def remove_on(node: Node, deployment: str, grace: int = STOP_GRACE_S) -> tuple[int, str | None]:
    """(containers removed, error) on one node."""
    r = await node.run(remove_command(deployment, grace), timeout=grace + 60)
    removed = len([x for x in r.stdout.split() if x])
    return removed, None if r.ok else (r.stderr.strip() or f"exit {r.exit_status}")


async def remove_stale(node: Node, names: list[str]) -> tuple[list[str], str | None]:
    """(removed, error): `docker rm` without -f of containers found stopped, so one that runs again
    meanwhile is refused by docker rather than killed; one call per node."""
    if not names:
        return [], None
    r = await node.run(["docker", "rm", *names], timeout=60)
    removed = [x for x in r.stdout.split() if x in names]
    return removed, None if r.ok else (r.stderr.strip() or f"exit {r.exit_status}")


async def remove_one(node: Node, container: str) -> str | None:
    r = await node.run(["docker", "rm", "-f", container], timeout=60)
    return None if r.ok else (r.stderr.strip() or f"exit {r.exit_status}")


async def inspect_one(node: Node, container: str) -> tuple[dict[str, str], str] | None:
    """(labels, state) of one container by name, whoever made it; None when docker knows none by that name
    (yet: a `docker run` still making it holds the name before inspect sees it)."""
    r = await node.run(
        ["docker", "inspect", "--format", "{{json .Config.Labels}} {{.State.Status}}", container], timeout=30
    )
    if not r.ok:
        return None
    text = r.stdout.strip()
    labels_json, _, state = text.rpartition(" ")
    try:
        labels = json.loads(labels_json) or {}
    except ValueError:
        return None
    return ({str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}), state


async def process_running(node: Node, container: str, needle: str) -> bool | None:
    """Whether a process whose command line holds `needle` runs in the container (None: can't tell).

    `docker top` reads the processes from the host, so the image needs no ps of its own.
    """
    r = await node.run(["docker", "top", container, "-o", "pid,args"], timeout=30)
    if not r.ok:
        r = await node.run(["docker", "top", container], timeout=30)  # some runtimes refuse ps options
        if not r.ok:
            return None
    return any(needle in line for line in r.stdout.splitlines()[1:])


def summarize(found: dict[str, Found]) -> list[dict]:
    """Deployments on the nodes, one dict each, for `status` (JSON and a one-line summary)."""
    by: dict[str, dict] = {}
    for f in found.values():
        for c in f.containers:
            name = c.labels.get(LABEL, "?")
            d = by.setdefault(name, {"name": name, "engines": set(), "plans": set(), "containers": []})
            d["engines"].add(L.engine_of(c.labels))
            d["plans"].add(L.plan_of(c.labels))
            d["containers"].append(
                {
                    "node": f.node,
                    "name": c.name,
                    "state": c.state,
                    "status": c.status,
                    "rank": c.labels.get(L.RANK),
                    "role": c.labels.get(L.ROLE),
                }
            )
    out = []
    for d in by.values():
        states = [c["state"] for c in d["containers"]]
        running = states.count("running")
        overall = "running" if running == len(states) else ("partial" if running else "exited")
        engines = ",".join(sorted(d["engines"]))
        where = ", ".join(f"{c['node']}:{c['state']}" for c in sorted(d["containers"], key=lambda c: c["rank"] or ""))
        out.append(
            {
                "name": d["name"],
                "engine": engines,
                "plan": ",".join(sorted(d["plans"])),
                "state": overall,
                "containers": d["containers"],
                "summary": f"{d['name']} ({engines}) {overall}: {where}",
            }
        )
    errors = [{"node": f.node, "error": f.error, "summary": f"{f.node}: {f.error}"} for f in found.values() if f.error]
    return out + errors
