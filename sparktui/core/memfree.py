"""Is there free memory for the engine on each node right now, page cache counted?

On unified memory (GB10) the engines size themselves from cudaMemGetInfo, whose "free" leaves out
the page cache. Right after a checkpoint is copied, the receiving node holds it in page cache:
vLLM then refuses ("Free memory on device ... is less than desired GPU memory utilization") and
SGLang sees the ranks as unbalanced. NVIDIA's guides drop the page cache first. Both engines take
their memory fraction of the GPU's total memory, so each node needs fraction x total free.
"""
from __future__ import annotations

from dataclasses import dataclass

from .facts import NodeFacts
from .fit import gib

DROP_CACHES = "sync; echo 3 > /proc/sys/vm/drop_caches"


@dataclass
class Shortfall:
    node: str
    need: int  # bytes the engine will ask for
    free: int  # what it will see as free
    cached: int  # page cache a drop would free
    fraction: float

    @property
    def cache_would_do(self) -> bool:
        """Dropping the page cache is enough."""
        return self.free + self.cached >= self.need

    def message(self) -> str:
        head = (f"{self.node}: {gib(self.free)} free for the GPU, the engine asks for {gib(self.need)} "
                f"({self.fraction:g} of memory)")
        if self.cache_would_do:
            return (f"{head}; {gib(self.cached)} is page cache (a checkpoint just read or copied): drop it with "
                    f"`sparktui drop-caches {self.node}` (runs `{DROP_CACHES}` as root), or lower the memory fraction")
        return (f"{head}, and the page cache ({gib(self.cached)}) would not make up for it: lower the memory "
                f"fraction or stop what holds memory on {self.node} (`sparktui status` lists containers)")


def shortfalls(facts: dict[str, NodeFacts], nodes: list[str], fraction: float) -> list[Shortfall]:
    """Nodes on unified memory whose free memory is below fraction x total (unknowns are skipped)."""
    out = []
    for name in nodes:
        f = facts.get(name)
        if f is None or not f.gpu.unified:
            continue
        m = f.memory
        if not m.total_bytes or m.free_bytes is None:
            continue
        need = int(m.total_bytes * fraction)
        if m.free_bytes < need:
            out.append(Shortfall(name, need, m.free_bytes, m.cached_bytes or 0, fraction))
    return out


# As root, or through sudo without a password prompt (never one sparktui could not answer).
DROP_SCRIPT = ("sync && if [ \"$(id -u)\" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches; "
               "else echo 3 | sudo -n tee /proc/sys/vm/drop_caches >/dev/null; fi && grep -E '^(MemFree|Cached):' /proc/meminfo")


@dataclass
class Dropped:
    node: str
    ok: bool
    free_after: int | None = None
    error: str = ""


async def drop_caches(node) -> Dropped:
    """Flush the page cache on one node (core.ssh.Node); the free memory afterwards when it worked."""
    r = await node.run(DROP_SCRIPT, timeout=120)
    if not r.ok:
        why = (r.stderr or r.stdout).strip().splitlines()
        return Dropped(node.name, False, error=(why[-1] if why else f"exit {r.exit_status}") +
                       " (needs root or passwordless sudo on the node)")
    free = next((int(ln.split()[1]) * 1024 for ln in r.stdout.splitlines() if ln.startswith("MemFree:")), None)
    return Dropped(node.name, True, free)
