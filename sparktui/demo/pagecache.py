"""A simulated node's page cache: `echo 3 > /proc/sys/vm/drop_caches` on the node frees it.

The node's /proc/meminfo is a file of ours bound over the real one, and /proc/sys/vm/drop_caches is
a FIFO bound over the real sysctl (so a drop never flushes this machine's cache). A thread per node
reads the FIFO; a write of 1 or 3 (page cache) moves Cached and Buffers, all but a little, into
MemFree, as the kernel does. Stdlib only.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
from pathlib import Path

LEFT_KB = 180_000  # what stays cached after a drop: files in use right now


def drop_page_cache(meminfo: str, left_kb: int = LEFT_KB) -> str:
    """meminfo after the page cache was dropped (MemAvailable stays: it already counted the cache)."""
    kb = {k: int(v) for k, v in re.findall(r"^(MemFree|Cached|Buffers):\s+(\d+)", meminfo, re.M)}
    if "MemFree" not in kb:
        return meminfo
    cached, buffers = kb.get("Cached", 0), kb.get("Buffers", 0)
    keep = min(left_kb, cached)
    freed = cached - keep + buffers
    out = re.sub(r"^MemFree:\s+\d+", f"MemFree:        {kb['MemFree'] + freed}", meminfo, flags=re.M)
    out = re.sub(r"^Cached:\s+\d+", f"Cached:         {keep}", out, flags=re.M)
    return re.sub(r"^Buffers:\s+\d+", "Buffers:        0", out, flags=re.M)


def rewrite(path: Path, text: str) -> None:
    """In place: the bind over /proc/meminfo follows the file's inode, not its name."""
    with open(path, "r+", encoding="utf-8") as f:
        f.truncate(0)
        f.write(text)


class CacheDropper:
    """Answers the node's drop_caches FIFO until stopped."""

    def __init__(self, fifo: Path, meminfo: Path) -> None:
        self.fifo, self.meminfo = fifo, meminfo
        self.drops = 0
        self._stopping = False
        if not fifo.exists():
            os.mkfifo(fifo, 0o600)
        self._thread = threading.Thread(target=self._run, name=f"drop-caches {fifo.parent.name}", daemon=True)

    def start(self) -> "CacheDropper":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping:
            try:
                with open(self.fifo, encoding="utf-8", errors="replace") as f:  # waits for a writer
                    said = f.read().strip()
            except OSError:
                return
            if self._stopping:
                return
            if said in ("1", "3"):  # 2 is dentries and inodes only: no page cache
                with contextlib.suppress(OSError):
                    rewrite(self.meminfo, drop_page_cache(self.meminfo.read_text(encoding="utf-8")))
                    self.drops += 1

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):  # wake the reader (no reader now: nothing to wake)
            os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
        self._thread.join(timeout=2)
