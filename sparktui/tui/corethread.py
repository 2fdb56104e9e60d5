"""A private event loop in a background thread for everything that talks to nodes.

Reading SSH streams is CPU work (asyncssh hands out buffered lines without ever suspending), and a
flood from eight nodes would otherwise fill the screen's own loop until keys and frames wait
behind it. On its own loop the core competes only for the interpreter lock, which Python hands
over every few milliseconds. Core events reach the app through post_message, which is thread-safe.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine


class CoreThread:
    def __init__(self, name: str = "sparktui-core") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._started = False

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    async def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run `coro` on the core loop and await its result here; cancelling here cancels it there."""
        self.start()
        if self.loop.is_closed():
            coro.close()
            raise RuntimeError("the core loop has stopped")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def stop(self, timeout: float = 5.0) -> None:
        if self._started and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
