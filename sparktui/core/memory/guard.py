"""The guard's judgement on each reading: ok, warn, stop or unwatched, with words and numbers. No I/O.

Per node the floor is the `memory.floor` (a size, or a share of MemTotal) and the warning band sits
`memory.warn` above it; /proc/pressure/memory's "full avg10" counts too, since a host that spends its
time reclaiming is wedging before MemAvailable says so. A short history per node gives the fall rate:
users saw MemAvailable drop 17-19 GiB within ~10 s of the weights loading, so the speed matters as
much as the level. No stop is made on a projection: engines take memory in large steps (the weights,
then a KV pool taken whole, then graphs), so two falls in a row say nothing of the next reading; the
floor has to leave room for one interval's fall.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from ..config.config import MemoryConfig
from .limits import amount_bytes
from .sample import MemSample
from ..state.states import ProblemKind as PK

GIB = 1024**3
HISTORY_S = 15.0  # the fall rate is measured over about this long
ALLOC_ENV = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


@dataclass
class Verdict:
    level: str  # "ok", "warn", "stop" or "unwatched"
    detail: str = ""  # what is wrong on the node, in words without its name (the Problem carries it)
    kind: PK | None = None  # the Problem's kind: MEMORY_LOW (warn), MEMORY_FLOOR or MEMORY_PRESSURE (stop)
    falling: float | None = None  # bytes/s MemAvailable is falling (negative: rising); None: not known yet


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


class Guard:
    """Judges each node's readings in turn; keeps what it needs of the past (history, what was said)."""

    def __init__(self, cfg: MemoryConfig, history_s: float = HISTORY_S):
        self.cfg = cfg
        self.history_s = history_s
        self._past: dict[str, deque[tuple[float, int]]] = {}
        self._said: set[str] = set()  # "node:what" told once already (unwatched, no pressure file)

    def fall_rate(self, node: str) -> float | None:
        """Bytes per second MemAvailable fell over the kept history (None with fewer than two readings)."""
        past = self._past.get(node)
        if not past or len(past) < 2 or past[-1][0] <= past[0][0]:
            return None
        (t0, a0), (t1, a1) = past[0], past[-1]
        return (a0 - a1) / (t1 - t0)

    def _remember(self, s: MemSample) -> None:
        past = self._past.setdefault(s.node, deque())
        past.append((s.at, s.available or 0))
        while len(past) > 2 and s.at - past[0][0] > self.history_s:
            past.popleft()

    def _once(self, key: str, words: str) -> str:
        if key in self._said:
            return ""
        self._said.add(key)
        return words

    def judge(self, s: MemSample) -> Verdict:
        if s.error or s.available is None or not s.total:
            why = s.error or f"no MemAvailable or MemFree on {s.node}"
            return Verdict("unwatched", self._once(f"{s.node}:error", f"{why}: memory not watched meanwhile"))
        self._said.discard(f"{s.node}:error")  # a later failure is news again
        self._remember(s)
        rate = self.fall_rate(s.node)
        floor = amount_bytes(self.cfg.floor, s.total) or 0
        band = floor + (amount_bytes(self.cfg.warn, s.total) or 0)
        falling = f", falling {gib(rate)}/s" if rate is not None and rate >= GIB / 10 else ""
        level, kind, words = "ok", None, ""
        notes = []
        if s.psi_some is None and s.psi_full is None:
            notes.append(self._once(f"{s.node}:psi", f"no /proc/pressure on {s.node}: pressure not watched"))
        limit = self.cfg.pressure
        if s.available < floor:
            level, kind = "stop", PK.MEMORY_FLOOR
            words = f"{gib(s.available)} available, under the {gib(floor)} floor{falling}"
        elif s.psi_full is not None and s.psi_full > limit:
            level, kind = "stop", PK.MEMORY_PRESSURE
            words = (
                f"memory pressure {s.psi_full:g}% (full avg10), over the {limit:g}% limit; "
                f"{gib(s.available)} available{falling}"
            )
        elif s.available < band:
            level, kind = "warn", PK.MEMORY_LOW
            words = f"{gib(s.available)} available, {gib(s.available - floor)} above the {gib(floor)} floor{falling}"
        elif s.psi_full is not None and s.psi_full > limit / 2:
            level, kind = "warn", PK.MEMORY_LOW
            words = f"memory pressure {s.psi_full:g}% (full avg10), half way to the {limit:g}% limit"
        if level == "stop" and not self.cfg.guard:
            level = "warn"
            words += " (memory.guard is off: nothing is stopped)"
        detail = "; ".join(w for w in [words, *notes] if w)
        return Verdict(level, detail, kind, rate)


def advice(
    s: MemSample,
    cfg: MemoryConfig,
    *,
    fraction: float | None = None,
    fraction_flag: str | None = None,
    kv_flag: str | None = None,
    len_flag: str | None = None,
    max_len: int | None = None,
    expandable: bool = False,
) -> str:
    """What to launch with instead, with numbers: the allocator setting, a lower memory fraction (current ->
    suggested), a fixed KV cache size, a shorter context. Flags are the engine's own (None: it has none).
    expandable: the allocator setting was already on, so it is not advised again."""
    total = s.total or 0
    floor = amount_bytes(cfg.floor, total) or 0
    band = amount_bytes(cfg.warn, total) or 0
    # what to give back: down to the floor, plus the warning band so the next launch runs clear of it
    short = max(0, floor - (s.available or 0)) + band
    out = [] if expandable else [f"launch with {ALLOC_ENV} (less fragmentation on unified memory)"]
    if fraction_flag and fraction and total:
        lower = max(0.05, math.floor((fraction - short / total) * 20) / 20)  # in steps of 0.05
        if lower < fraction:
            out.append(f"lower {fraction_flag} from {fraction:g} to {lower:g}")
    if kv_flag and total:
        out.append(f"or give the KV cache a fixed size with {kv_flag}, {gib(short)} under what it took here")
    if len_flag:
        half = f" {max_len // 2}" if max_len else " (half the model's default, say)"
        out.append(f"or a shorter {len_flag}{half}")
    if out and out[0].startswith("or "):
        out[0] = out[0][3:]  # the first way out is no alternative to anything
    return "; ".join(out)
