"""The node's memory as the engines take it, played on a simulated node's stand-in /proc/meminfo.

On a GB10 the GPU's memory is the node's: what an engine allocates (CUDA context and NCCL buffers, the
weights shard by shard, the profiling peak, the KV cache after the load, CUDA graphs) leaves MemAvailable,
and comes back when the process ends. The simulator plays that only where SPARKTUI_SIM_MEMINFO names
the node's stand-in meminfo (the demo sets it): a regular file with content, never procfs or sysfs.

Each process records what it holds, per node, in a ledger directory (SPARKTUI_SIM_MEM_LEDGER, default
`<meminfo>.held`): one file per process and node, three lines: the meminfo path and the kB taken from
MemAvailable and from MemFree. A container's supervisor hands back whatever its processes still hold
when the container ends (`release_ledger`), even killed.
Every change is a read-modify-write under flock on the meminfo file itself, so several containers on one
node add up; written in place, as the bind over /proc/meminfo follows the file's inode.
Stdlib only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Iterator

from . import clock
from .model import GIB

MEMINFO_ENV = "SPARKTUI_SIM_MEMINFO"
LEDGER_ENV = "SPARKTUI_SIM_MEM_LEDGER"
_FIELD = re.compile(r"^(MemFree|MemAvailable):(\s+)(\d+)", re.M)


def usable(path: str | os.PathLike | None) -> bool:
    """A file the simulator may rewrite: regular, not empty, on neither procfs nor sysfs."""
    if not path:
        return False
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:  # procfs files are "regular" of size 0
            return False
        for pseudo in ("/proc", "/sys"):
            with contextlib.suppress(OSError):
                if os.stat(pseudo).st_dev == st.st_dev:
                    return False
        real = os.path.realpath(path)
        return not (real.startswith("/proc/") or real.startswith("/sys/"))
    except OSError:
        return False


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator:
    """The meminfo file opened for update, under an exclusive flock (also taken by the demo's page cache)."""
    with open(path, "r+", encoding="utf-8") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield f
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def write_in_place(f, text: str) -> None:
    """Over the old content, then cut: a reader never meets an empty file."""
    f.seek(0)
    f.write(text)
    f.truncate()
    f.flush()


def field_kb(text: str, name: str) -> int | None:
    m = re.search(rf"^{name}:\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def shift(text: str, avail_kb: int, free_kb: int | None = None) -> tuple[str, int, int]:
    """meminfo with avail_kb more in use (negative: given back), of which free_kb (default: the same) out of
    MemFree; returns it and what MemAvailable and MemFree moved by. An allocation stops at an empty node
    (the kernel would kill rather than go below), and the ledger keeps what really moved."""
    have = {k: field_kb(text, k) for k in ("MemAvailable", "MemFree")}
    if have["MemAvailable"] is None:
        return text, 0, 0
    want = {"MemAvailable": avail_kb, "MemFree": avail_kb if free_kb is None else free_kb}
    moved = {k: min(want[k], have[k] or 0) for k in want}

    def sub(m: re.Match) -> str:
        value = max(0, int(m.group(3)) - moved[m.group(1)])
        width = len(m.group(2)) + len(m.group(3))  # the columns stay where they were
        return f"{m.group(1)}:{str(value).rjust(width)}"

    return _FIELD.sub(sub, text), moved["MemAvailable"], moved["MemFree"]


def _read_ledger(path: Path) -> tuple[str, int, int]:
    """(meminfo path, kB of MemAvailable, kB of MemFree) one ledger entry holds; OSError/ValueError."""
    lines = path.read_text().split("\n")
    return lines[0], int(lines[1]), int(lines[2])


def _ledger_dir(meminfo: str) -> Path:
    return Path(os.environ.get(LEDGER_ENV) or meminfo + ".held")


class Holding:
    """What this process holds on one node's meminfo."""

    def __init__(self, meminfo: str, ledger: Path | None = None) -> None:
        self.meminfo = meminfo
        self.ledger = (ledger or _ledger_dir(meminfo)) / (
            f"{os.getpid()}-{hashlib.sha1(os.path.realpath(meminfo).encode()).hexdigest()[:12]}"
        )

    def held_kb(self) -> tuple[int, int]:
        try:
            return _read_ledger(self.ledger)[1:]
        except (OSError, ValueError, IndexError):
            return 0, 0

    def set(self, kb: int) -> None:
        """Hold kb in all on this node (more or less than before)."""
        try:
            with locked(self.meminfo) as f:
                avail, free = self.held_kb()
                # giving back: MemFree gets what it gave (it may have given less, at an empty node)
                text, moved, moved_free = shift(f.read(), kb - avail, None if kb >= avail else -min(free, avail - kb))
                write_in_place(f, text)
                held = avail + moved
                if held > 0:
                    self.ledger.parent.mkdir(parents=True, exist_ok=True)
                    tmp = self.ledger.with_name(self.ledger.name + ".tmp")
                    tmp.write_text(f"{self.meminfo}\n{held}\n{free + moved_free}\n")
                    tmp.replace(self.ledger)
                else:
                    self.ledger.unlink(missing_ok=True)
        except OSError:
            pass  # the node's file went away (the demo is ending): nothing to account any more


class EngineMemory:
    """An engine's allocations by phase, per rank, on the node(s) its ranks run on.

    `set(phase, gib, where)`: every rank in `where` (a list of meminfo paths, one per rank, None for this
    node; `where` None: one rank here) holds gib for that phase. Does nothing unless SPARKTUI_SIM_MEMINFO names a usable file."""

    def __init__(self) -> None:
        here = os.environ.get(MEMINFO_ENV)
        self.here = here if usable(here) else None
        self.phases: dict[str, tuple[float, list[str]]] = {}
        self.holdings: dict[str, Holding] = {}

    @property
    def enabled(self) -> bool:
        return self.here is not None

    def node_file(self, node_dir: str | None) -> str | None:
        """Another node's meminfo (a Ray worker placed there), when that node is simulated too."""
        if not self.enabled or not node_dir:
            return None
        path = os.path.join(node_dir, "meminfo")
        return path if usable(path) else None

    def set(self, phase: str, gib: float, where: list[str | None] | None = None) -> None:
        if not self.enabled:
            return
        self.phases[phase] = (max(0.0, gib), [w or self.here for w in ([None] if where is None else where)])  # type: ignore[misc]
        self._apply()

    async def fill(
        self,
        phase: str,
        start: float,
        end: float,
        engine_s: float,
        where: list[str | None] | None = None,
        steps: int = 8,
    ) -> None:
        """Take a phase from `start` to `end` GiB over `engine_s` engine seconds, a step at a time, as a shard
        read from disk fills memory while it loads (without accounting: only the pause)."""
        if not self.enabled:
            await clock.pause(engine_s)
            return
        for j in range(1, steps + 1):
            await clock.pause(engine_s / steps)
            if j < steps:  # the last step is the caller's, after its own checks (an out-of-memory crash)
                self.set(phase, start + (end - start) * j / steps, where)

    def release(self) -> None:
        self.phases.clear()
        self._apply()

    def _apply(self) -> None:
        want: dict[str, float] = {path: 0.0 for path in self.holdings}
        for gib, paths in self.phases.values():
            for p in paths:
                want[p] = want.get(p, 0.0) + gib
        for path, gib in want.items():
            h = self.holdings.setdefault(path, Holding(path))
            h.set(int(gib * GIB // 1024))


def release_ledger(ledger: str | os.PathLike) -> None:
    """Give back what the processes recorded in `ledger` still hold (their container ended)."""
    d = Path(ledger)
    if not d.is_dir():
        return
    for entry in sorted(d.iterdir()):
        if entry.name.endswith(".tmp"):
            entry.unlink(missing_ok=True)
            continue
        try:
            meminfo = _read_ledger(entry)[0]
            if not usable(meminfo):
                entry.unlink(missing_ok=True)
                continue
            with locked(meminfo) as f:
                try:  # read again under the lock: the process may have given it back meanwhile
                    _, avail, free = _read_ledger(entry)
                except (OSError, ValueError, IndexError):
                    continue
                text, _, _ = shift(f.read(), -avail, -free)
                write_in_place(f, text)
                entry.unlink(missing_ok=True)
        except (OSError, ValueError, IndexError):
            entry.unlink(missing_ok=True)
