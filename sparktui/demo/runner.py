"""Running a demo next to something else: its own event loop on a thread, or a `demo up` to find later.

The TUI runs Textual's loop on the main thread; the demo nodes' SSH servers (which also carry
node-to-node rsync traffic) get a loop of their own, so neither waits on the other.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .cluster import PREFIX, DemoCluster, DemoOptions
from .errors import DemoError


class ThreadedDemo:
    """A DemoCluster served from a background thread: start() returns once the nodes answer."""

    def __init__(self, options: DemoOptions):
        self.cluster = DemoCluster(options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._starting: asyncio.Task | None = None

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._starting = loop.create_task(self.cluster.start())
            loop.run_until_complete(self._starting)
        except BaseException as e:  # noqa: BLE001 - handed to the starting thread
            self._error = e
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self.cluster.stop())
            loop.close()

    def start(self, timeout: float = 180.0) -> DemoCluster:
        self._thread = threading.Thread(target=self._main, name="sparktui-demo", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise DemoError(f"the simulated nodes did not come up within {timeout:g} s")
        if self._error is not None:
            raise self._error
        return self.cluster

    def stop(self, timeout: float = 60.0) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):
            if not self._ready.is_set() and self._starting is not None:
                # still starting (Ctrl-C while the nodes come up): start() cleans up what it made
                loop.call_soon_threadsafe(self._starting.cancel)
            else:
                loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)


@dataclass
class Running:
    """A demo started by `sparktui demo up` (maybe in another terminal), from its demo.json."""

    id: str
    pid: int
    root: Path
    config: str
    started: float
    background: bool = False  # started by `demo up` (an older demo.json without the field: treated as not)


def _start_time(pid: int) -> float | None:
    """When a live process started (epoch seconds), from /proc: tells a reused pid from the demo's."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):
            return None  # ended; only its parent has not collected it yet
        ticks = int(fields[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def running_demos(base: str | None = None) -> list[Running]:
    """This user's demos whose process is still the one that started them."""
    out = []
    for meta in sorted(Path(base or tempfile.gettempdir()).glob(f"{PREFIX}*/demo.json")):
        try:
            d = json.loads(meta.read_text())
            pid, started = int(d["pid"]), float(d["started"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if d.get("uid") != os.getuid():
            continue
        began = _start_time(pid)
        if began is None or began > started + 2:
            continue  # gone, or the pid now belongs to another process
        out.append(Running(d.get("id", meta.parent.name), pid, meta.parent, d.get("config", ""), started,
                           d.get("background") is True))
    return out


def stop_demo(demo: Running, timeout: float = 60.0) -> bool:
    """Ask a running demo to end (SIGTERM) and wait for its process to go; True when it did."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(demo.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _start_time(demo.pid) is None:
            return True
        time.sleep(0.1)
    return False
