"""One network link per simulated node, shared by every stream the node sends.

A stream that carries bulk data (rsync, docker save | load, through the node's `ssh`) takes a lease
in the node's link directory and paces itself to the link's rate divided by the leases held right
now: two copies leaving one node each get half of its link, as on a real NIC, so a fan-out that
runs several streams per sender gains nothing from them. A stream is also held to `stream_rate`
when set: one rsync over one ssh is bound by the core or two it runs on (on a DGX Spark about
0.35-0.64 GB/s against a 25 GB/s link), so a copy's parallel streams add up until the link is
full. Stdlib only (the shims import it).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

REFRESH = 0.2  # seconds between looks at how many streams share the link
CHUNK = 65536
BURST = 0.25  # seconds of unused rate a stream may catch up on


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Lease:
    """This process's share of the link while it sends."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / str(os.getpid())
        self.path.touch()

    def sharers(self) -> int:
        n = 0
        for p in self.dir.iterdir():
            try:
                pid = int(p.name)
            except ValueError:
                continue
            if pid == os.getpid() or _alive(pid):
                n += 1
            else:
                p.unlink(missing_ok=True)  # a stream that died without its goodbye
        return max(1, n)

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


def share_of(rate: float, sharers: int, stream_rate: float = 0.0) -> float:
    """Bytes/s one stream may send: its part of the link, at most what one stream can push."""
    share = rate / max(1, sharers)
    return min(share, stream_rate) if stream_rate > 0 else share


def pump(src: int, dst: int, rate: float, link_dir: Path, stream_rate: float = 0.0) -> int:
    """Copy src to dst at this stream's share of `rate` bytes/s (at most `stream_rate` when set);
    returns the bytes copied."""
    lease = Lease(link_dir)
    sent = 0
    try:
        share, looked = share_of(rate, lease.sharers(), stream_rate), time.monotonic()
        due = time.monotonic()  # when the bytes sent so far may have left at the share
        while True:
            data = os.read(src, CHUNK)
            if not data:
                break
            view = memoryview(data)
            while view:
                n = os.write(dst, view)
                view = view[n:]
            sent += len(data)
            now = time.monotonic()
            if now - looked >= REFRESH:
                share, looked = share_of(rate, lease.sharers(), stream_rate), now
            due = max(due, now - BURST) + len(data) / share
            if due > now:
                time.sleep(due - now)
    finally:
        lease.close()
    return sent
