"""Process plumbing shared by the engines: signals, the init watchdog, traceback-shaped errors."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from typing import Awaitable, Callable

from . import clock

PY = "/usr/local/lib/python3.12/dist-packages"  # where the engines live in their images


def run(main: Callable[[], Awaitable[int]]) -> int:
    """Run `main` until it returns an exit status. SIGTERM/SIGINT (docker stop, Ctrl-C) cancel it;
    `main` may print its shutdown lines on CancelledError, and the process then exits 0."""

    async def wrapper() -> int:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        job = asyncio.ensure_future(main())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({job, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if job.done():
            stopper.cancel()
            return job.result()
        job.cancel()
        try:
            await asyncio.wait_for(job, 10)
        except (asyncio.CancelledError, asyncio.TimeoutError):
            pass
        except Exception:
            pass
        return 0

    try:
        code = asyncio.run(wrapper())
    except KeyboardInterrupt:
        code = 130
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # the reader left (`| head`); nothing more to say to it
    return int(code or 0)


class Watchdog:
    """Fires when nobody fed it for `timeout` engine seconds."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._last = time.monotonic()

    def feed(self) -> None:
        self._last = time.monotonic()

    async def expired(self) -> None:
        while True:
            left = self._last + clock.scaled(self.timeout) - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 1.0))


async def first(*aws: Awaitable) -> tuple[int, object]:
    """Await several things; return (index, result) of the first to finish and cancel the rest.
    An exception from the first one propagates."""
    jobs = [asyncio.ensure_future(a) for a in aws]
    try:
        done, _ = await asyncio.wait(jobs, return_when=asyncio.FIRST_COMPLETED)
        for i, t in enumerate(jobs):
            if t in done:
                return i, t.result()
        raise RuntimeError("unreachable")
    finally:
        for t in jobs:
            if not t.done():
                t.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)


async def forever() -> None:
    await asyncio.Event().wait()


def traceback_text(frames: list[tuple[str, int, str, str]], last: str) -> str:
    """A Python traceback: frames are (file, line, function, source line)."""
    out = ["Traceback (most recent call last):"]
    for path, line, func, src in frames:
        out.append(f'  File "{path}", line {line}, in {func}')
        out.append(f"    {src}")
    out.append(last)
    return "\n".join(out)
