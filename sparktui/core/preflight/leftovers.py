"""What an earlier launch or copy left on a node, named before a launch with what frees it.

- Stale containers: sparktui's engine containers (by label) that no longer run, of other
  deployments (this one's are replaced by the launch itself, which removes them first). Removing them (`docker rm`, refused by docker should one run again) is
  offered after a confirmation; a running container of another deployment is never stale: the
  memory it holds (`docker stats`, where docker can tell) is named, nothing more.
- Page cache (`Cached` in /proc/meminfo) on unified memory: a checkpoint just copied or read sits there
  and the GPU counts it as used; the drop-cache flow (`sparktui drop-caches NODE`) frees it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field

from ..state import labels as L
from ..nodes.facts import Memory
from ..plan.fit import gib
from ..nodes.probes import parse_docker_ps

CACHE_WORTH = 1 << 30  # less page cache than this is not worth naming
RUNNING = ("running", "restarting", "paused")  # a container in these states is not stale
_SIZE = re.compile(r"^\s*([\d.]+)\s*([KMGTP]?i?B)\s*$", re.I)
_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
}


def parse_size(text: str) -> int | None:
    """Docker's sizes ("1.5GiB", "512MiB", "0B", "12.3MB"): bytes, or None."""
    m = _SIZE.match(text or "")
    if not m:
        return None
    unit = _UNITS.get(m[2].lower())
    return None if unit is None else int(float(m[1]) * unit)


def parse_stats(lines: list[str]) -> dict[str, int | None]:
    """`docker stats --format '{{.Name}} {{.MemUsage}}'`: name -> bytes used (the part before " / ")."""
    out: dict[str, int | None] = {}
    for line in lines:
        name, _, usage = line.strip().partition(" ")
        if name:
            out[name] = parse_size(usage.split("/")[0])
    return out


@dataclass
class Stale:
    name: str
    deployment: str
    engine: str
    state: str
    status: str = ""


@dataclass
class Held:
    name: str
    deployment: str
    engine: str
    memory: int | None = None  # bytes docker counts for it (None: not known)


@dataclass
class Leftovers:
    """One node's leftovers and what frees each."""

    node: str
    page_cache: int | None = None  # bytes of page cache worth dropping (unified memory only)
    stale: list[Stale] = field(default_factory=list)
    running: list[Held] = field(default_factory=list)  # other deployments' running containers: never removed
    error: str | None = None  # docker could not list the containers

    @property
    def any(self) -> bool:
        return bool(self.page_cache or self.stale or self.running or self.error)

    @property
    def drop_command(self) -> str:
        return f"sparktui drop-caches {shlex.quote(self.node)}"

    @property
    def remove_command(self) -> str:
        return "docker rm " + " ".join(shlex.quote(s.name) for s in self.stale)

    def lines(self) -> list[str]:
        out = []
        if self.page_cache:
            out.append(
                f"{self.node}: {gib(self.page_cache)} of page cache (a checkpoint copied or read): "
                f"`{self.drop_command}` frees it"
            )
        for s in self.stale:
            out.append(
                f"{self.node}: stale container {s.name} ({s.engine}, deployment {s.deployment}, {s.state}): "
                f"no process of it runs; `docker rm {shlex.quote(s.name)}` on {self.node} removes it"
            )
        for h in self.running:
            mem = f" holds {gib(h.memory)}" if h.memory is not None else " runs (its memory is not known)"
            out.append(
                f"{self.node}: {h.name} of deployment {h.deployment} ({h.engine}){mem}; it is not stale: "
                f"stop that deployment if its memory is needed (`sparktui stop --deployment "
                f"{shlex.quote(h.deployment)}`)"
            )
        if self.error:
            out.append(f"{self.node}: sparktui's containers could not be listed: {self.error}")
        return out

    def to_json(self) -> dict:
        d = asdict(self)
        d["drop_caches"] = self.drop_command if self.page_cache else None
        d["remove"] = self.remove_command if self.stale else None
        return d


def leftovers_of(
    node: str,
    deployment: str,
    containers: list[str] | None,
    stats: list[str],
    memory: Memory | None,
    unified: bool,
    error: str | None = None,
) -> Leftovers:
    """Judge one node's look: stale containers (other deployments'), others' running ones, page cache."""
    out = Leftovers(node, error=error)
    if unified and memory is not None and (memory.cached_bytes or 0) >= CACHE_WORTH:
        out.page_cache = memory.cached_bytes
    used = parse_stats(stats)
    rows = parse_docker_ps("\n".join(containers or []))
    for c in rows:
        dep = c.labels.get(L.DEPLOYMENT)
        if not dep:  # docker's filter already asked for the label; nothing without it is touched
            continue
        if c.state not in RUNNING:
            if dep != deployment:  # this deployment's own: the launch or pivot clears them, unasked
                out.stale.append(Stale(c.name, dep, L.engine_of(c.labels), c.state, c.status))
        elif dep != deployment:
            out.running.append(Held(c.name, dep, L.engine_of(c.labels), used.get(c.name)))
    return out
