"""One reading of a node's memory: /proc/meminfo and, where the kernel has it, /proc/pressure/memory."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

_KB = re.compile(r"^(MemTotal|MemAvailable|MemFree|Cached|Buffers|SwapTotal|SwapFree):\s+(\d+)\s*kB", re.M)
_PSI = re.compile(r"^(some|full)\s+avg10=(\d+(?:\.\d+)?)", re.M)


@dataclass
class MemSample:
    """What a node's kernel said at `at` (time.time()); None where it did not say (error: why nothing was read)."""

    node: str
    at: float
    total: int | None = None  # bytes
    available: int | None = None  # MemAvailable, or MemFree + page cache on a kernel without it
    swap_total: int | None = None
    swap_free: int | None = None
    psi_some: float | None = None  # % of the last 10 s some task waited for memory (None: no /proc/pressure)
    psi_full: float | None = None  # % of the last 10 s every task waited for memory
    estimated: bool = False  # available came from MemFree + page cache (no MemAvailable line)
    error: str | None = None

    @property
    def swap_used(self) -> int | None:
        if self.swap_total is None or self.swap_free is None:
            return None
        return max(0, self.swap_total - self.swap_free)

    def to_json(self) -> dict:
        return asdict(self)


def parse_sample(node: str, at: float, meminfo: str, pressure: str | None) -> MemSample:
    """A sample from the two files' text; a meminfo without MemTotal is an error, not zeros."""
    kb = {k: int(v) * 1024 for k, v in _KB.findall(meminfo or "")}
    if "MemTotal" not in kb:
        return MemSample(node, at, error="no MemTotal in /proc/meminfo")
    s = MemSample(node, at, total=kb["MemTotal"], swap_total=kb.get("SwapTotal"), swap_free=kb.get("SwapFree"))
    if "MemAvailable" in kb:
        s.available = kb["MemAvailable"]
    elif "MemFree" in kb:  # kernels before 3.14
        s.available = kb["MemFree"] + kb.get("Cached", 0) + kb.get("Buffers", 0)
        s.estimated = True
    psi = dict(_PSI.findall(pressure or ""))
    if psi:
        s.psi_some = float(psi["some"]) if "some" in psi else None
        s.psi_full = float(psi["full"]) if "full" in psi else None
    return s
