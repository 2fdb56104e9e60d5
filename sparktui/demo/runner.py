"""Running a demo next to something else: its own event loop on a thread, or a `demo up` to find later (registry.py).

The TUI runs Textual's loop on the main thread; the demo nodes' SSH servers (which also carry
node-to-node rsync traffic) get a loop of their own, so neither waits on the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

from . import proc, registry
from .cluster import DemoCluster, DemoOptions
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


def running_demos() -> list[registry.Entry]:
    """This user's demos (its own registry) whose process is still the sparktui demo that started them."""
    return [e for _, e in registry.entries() if e.alive() and proc.is_demo(e.pid)]


def stop_demo(demo: registry.Entry, timeout: float = 60.0) -> bool:
    """Ask a running demo to end (SIGTERM), proving its identity first, and wait for it to go; True when it did."""
    if not proc.terminate(demo.pid, demo.start_ticks):
        return not demo.alive()  # already gone counts as stopped; a pid now someone else's is left alone
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not demo.alive():
            return True
        time.sleep(0.1)
    return False
