"""Is there free memory for the engine on each node right now, page cache counted?

On unified memory (GB10) the engines size themselves from cudaMemGetInfo, whose "free" leaves out
the page cache. Right after a checkpoint is copied, the receiving node holds it in page cache:
vLLM then refuses ("Free memory on device ... is less than desired GPU memory utilization") and
SGLang sees the ranks as unbalanced. NVIDIA's guides drop the page cache first. Both engines take
their memory fraction of the GPU's total memory, so each node needs fraction x total free.

The plan checks read the inventory's /proc/meminfo; the preflight reads it again on each node (the
copy may have ended since); drop-caches flushes the cache, asking first through one confirmation
text (DropPreview) that the TUI shows and the CLI prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..nodes.facts import Memory, NodeFacts
from ..plan.fit import gib
from ..nodes.probes import parse_meminfo

DROP_CACHES = "sync; echo 3 > /proc/sys/vm/drop_caches"
HOW = "as root, or through sudo -n (never a password prompt)"


@dataclass
class FreeMemory:
    """One node's free memory against what the engine will ask for."""

    node: str
    need: int  # bytes the engine will ask for
    free: int  # what it will see as free
    cached: int  # page cache a drop would free
    fraction: float
    total: int | None = None

    @property
    def short(self) -> bool:
        return self.free < self.need

    @property
    def cache_would_do(self) -> bool:
        """Dropping the page cache is enough."""
        return self.free + self.cached >= self.need

    @property
    def droppable(self) -> bool:
        """Short, and a drop of the page cache would make up for it."""
        return self.short and self.cache_would_do

    def brief(self) -> str:
        """A few words for a row: ok, or short and whether a drop would do."""
        if not self.short:
            return f"memory ok ({gib(self.free)} free, {gib(self.need)} needed)"
        tail = "dropping the page cache would do" if self.cache_would_do else "the page cache would not make up for it"
        return f"memory short ({gib(self.free)} free, {gib(self.need)} needed; {tail})"

    def message(self) -> str:
        head = (
            f"{self.node}: {gib(self.free)} free for the GPU, the engine asks for {gib(self.need)} "
            f"({self.fraction:g} of memory)"
        )
        if self.cache_would_do:
            return (
                f"{head}; {gib(self.cached)} is page cache (a checkpoint just read or copied): drop it with "
                f"`sparktui drop-caches {self.node}` (runs `{DROP_CACHES}` as root), or lower the memory fraction"
            )
        return (
            f"{head}, and the page cache ({gib(self.cached)}) would not make up for it: lower the memory "
            f"fraction or stop what holds memory on {self.node} (`sparktui status` lists containers)"
        )

    def fix(self) -> str:
        if self.cache_would_do:
            return (
                f"drop the page cache on {self.node} (`sparktui drop-caches {self.node}`), or lower the memory fraction"
            )
        return f"lower the memory fraction, or stop what holds memory on {self.node}"

    def to_json(self) -> dict:
        return {**asdict(self), "short": self.short, "cache_would_do": self.cache_would_do}


Shortfall = FreeMemory  # a FreeMemory whose node is short


def measure(node: str, memory: Memory | None, fraction: float | None) -> FreeMemory | None:
    """The node's free memory against fraction x total; None when either is unknown."""
    if memory is None or fraction is None or not memory.total_bytes or memory.free_bytes is None:
        return None
    return FreeMemory(
        node,
        int(memory.total_bytes * fraction),
        memory.free_bytes,
        memory.cached_bytes or 0,
        fraction,
        memory.total_bytes,
    )


def shortfalls(facts: dict[str, NodeFacts], nodes: list[str], fraction: float) -> list[FreeMemory]:
    """Nodes on unified memory whose free memory is below fraction x total (unknowns are skipped)."""
    out = []
    for name in nodes:
        f = facts.get(name)
        if f is None or not f.gpu.unified:
            continue
        m = measure(name, f.memory, fraction)
        if m is not None and m.short:
            out.append(m)
    return out


@dataclass
class DropPreview:
    """What drop-caches will run where, and what is known of each node's memory now: the one
    confirmation text of both fronts."""

    nodes: list[str]
    known: dict[str, FreeMemory] = field(default_factory=dict)  # the check that found the shortfall

    @property
    def title(self) -> str:
        return f"Drop the page cache on {', '.join(self.nodes)}"

    def lines(self) -> list[str]:
        out = []
        for n in self.nodes:
            out.append(f"{n}: run `{DROP_CACHES}` {HOW}")
            m = self.known.get(n)
            if m is not None:
                out.append(f"  now {gib(m.free)} free, {gib(m.cached)} page cache; the engine asks for {gib(m.need)}")
        return out + ["running programs keep their memory; files are read from disk again, so first reads are slower"]

    def text(self) -> str:
        return "\n".join([self.title + ":"] + ["  " + ln for ln in self.lines()])


# As root, or through sudo without a password prompt (never one sparktui could not answer); meminfo
# before and after in the same round trip, so the result can say what the drop freed.
MEMINFO_LINES = "grep -E '^(MemTotal|MemFree|MemAvailable|Buffers|Cached):' /proc/meminfo"
DROP_SCRIPT = (
    f'{MEMINFO_LINES}; echo @@after; sync && if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches; '
    f"else echo 3 | sudo -n tee /proc/sys/vm/drop_caches >/dev/null; fi && {MEMINFO_LINES}"
)


@dataclass
class Dropped:
    node: str
    ok: bool
    before: Memory | None = None
    after: Memory | None = None
    error: str = ""

    @property
    def free_after(self) -> int | None:
        return self.after.free_bytes if self.after else None

    def summary(self) -> str:
        if not self.ok:
            return f"{self.node}: not dropped: {self.error}"
        b, a = self.before or Memory(), self.after or Memory()
        return (
            f"{self.node}: page cache dropped, free {gib(b.free_bytes)} -> {gib(a.free_bytes)} "
            f"(page cache {gib(b.cached_bytes)} -> {gib(a.cached_bytes)})"
        )

    def to_json(self) -> dict:
        return {
            "node": self.node,
            "ok": self.ok,
            "free_before": self.before.free_bytes if self.before else None,
            "free_after": self.free_after,
            "cached_before": self.before.cached_bytes if self.before else None,
            "cached_after": self.after.cached_bytes if self.after else None,
            "error": self.error,
        }


def parse_drop(node: str, ok: bool, stdout: str, stderr: str, exit_status: int | None) -> Dropped:
    before_text, sep, after_text = stdout.partition("@@after")
    before = parse_meminfo(before_text) if before_text.strip() else None
    if not ok:
        why = (stderr or after_text).strip().splitlines()
        return Dropped(
            node,
            False,
            before,
            error=(why[-1] if why else f"exit {exit_status}") + " (needs root or passwordless sudo on the node)",
        )
    after = parse_meminfo(after_text) if sep and after_text.strip() else None
    return Dropped(node, True, before, after)


async def drop_caches(node) -> Dropped:
    """Flush the page cache on one node (core.ssh.Node): its memory before and after."""
    r = await node.run(DROP_SCRIPT, timeout=120)
    return parse_drop(node.name, r.ok, r.stdout, r.stderr, r.exit_status)
