"""A simulated node's page cache: `echo 3 > /proc/sys/vm/drop_caches` on the node frees it.

The node's /proc/meminfo is a file of ours bound over the real one, and so is drop_caches (a write
never flushes this machine's cache). The node's PID 1 (holder.py) holds a read lease on the
drop_caches file: a process opening it for writing is held in open() while the kernel tells the
holder (SIGIO), which moves Cached and Buffers, all but a little, into MemFree and lets the open go
on. So the drop is done before the write returns, as the kernel's own is, and whatever reads
meminfo next sees it. Any write counts as a page-cache drop (1 and 3 are; 2 alone is rare).
Stdlib only: the holder imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import sys
from pathlib import Path
from typing import Callable

from ..sim import hostmem

LEFT_KB = 180_000  # what stays cached after a drop: files in use right now
F_SETLEASE = getattr(fcntl, "F_SETLEASE", 1024)
RETAKE_S = 0.01  # the writer still has the file open right after its open: take the lease back shortly
RETAKE_TRIES = 500  # bounded: 5 s, then the node stops simulating drops (and says so)


def drop_page_cache(meminfo: str, left_kb: int = LEFT_KB) -> str:
    """meminfo after the page cache was dropped (MemAvailable stays: it already counted the cache)."""
    kb = {k: int(v) for k, v in re.findall(r"^(MemFree|Cached|Buffers):\s+(\d+)", meminfo, re.M)}
    if "MemFree" not in kb:
        return meminfo
    cached, buffers = kb.get("Cached", 0), kb.get("Buffers", 0)
    keep = min(left_kb, cached)
    out = re.sub(r"^MemFree:\s+\d+", f"MemFree:        {kb['MemFree'] + cached - keep + buffers}", meminfo, flags=re.M)
    out = re.sub(r"^Cached:\s+\d+", f"Cached:         {keep}", out, flags=re.M)
    return re.sub(r"^Buffers:\s+\d+", "Buffers:        0", out, flags=re.M)


def rewrite(path: Path | str, change: str | Callable[[str], str]) -> None:
    """The new text (or change(old text)), in place: the bind over /proc/meminfo follows the file's inode,
    not its name. Under the lock the simulated engines take to move their memory (sim/hostmem.py)."""
    with hostmem.locked(path) as f:
        old = f.read()
        hostmem.write_in_place(f, change(old) if callable(change) else change)


class PageCache:
    """In the holder's main thread: the lease on drop_caches and the drop it stands for."""

    def __init__(self, drop_caches: str, meminfo: str) -> None:
        self.meminfo = meminfo
        self.fd = os.open(drop_caches, os.O_RDONLY)
        self.tries = 0

    def start(self) -> None:
        signal.signal(signal.SIGIO, self._opened)
        signal.signal(signal.SIGALRM, self._retake)
        fcntl.fcntl(self.fd, F_SETLEASE, fcntl.F_RDLCK)  # raises where leases are not allowed

    def _opened(self, *_: object) -> None:
        """Someone opens drop_caches to write: drop, then let the open return."""
        with contextlib.suppress(OSError):
            rewrite(self.meminfo, drop_page_cache)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.fd, F_SETLEASE, fcntl.F_UNLCK)
        self.tries = 0
        signal.setitimer(signal.ITIMER_REAL, RETAKE_S)

    def _retake(self, *_: object) -> None:
        try:
            fcntl.fcntl(self.fd, F_SETLEASE, fcntl.F_RDLCK)
        except OSError as e:  # EAGAIN while the writer still holds it open
            self.tries += 1
            if self.tries < RETAKE_TRIES:
                signal.setitimer(signal.ITIMER_REAL, RETAKE_S)
            else:
                print(f"note: drop_caches is no longer simulated ({e})", file=sys.stderr, flush=True)
