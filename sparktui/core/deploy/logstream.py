"""Follow one container's output with `docker logs -f -t`, resuming after a dropped link.

A resumed read asks for `--since <last timestamp seen>`. Docker keeps every entry that is not
before that instant, so the lines carrying exactly that timestamp come again: the follower counts
them and skips as many, so across any number of drops no line is lost or doubled.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from .. import dockerts
from ..secrets import mask
from ..ssh import Node

# docker logs -t: RFC3339Nano in UTC ("2026-01-02T03:04:05.123456789Z"); older clients trim zeros.

RESUME_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0)  # between resumes that brought nothing new; the last repeats
MAX_RESUMES = 2000  # a follower that keeps failing stops (with reason "lost") instead of spinning


@dataclass(frozen=True)
class LogLine:
    ts: str | None  # docker's timestamp as printed, None for lines docker itself wrote (errors)
    key: tuple[int, int] | None  # (unix seconds, nanoseconds): exact ordering for the dedupe
    text: str  # the container's line without the timestamp

    @property
    def seconds(self) -> float | None:
        return self.key[0] + self.key[1] / 1e9 if self.key else None


def split_ts(raw: str) -> LogLine:
    """A `docker logs -t` line as (timestamp, exact key, text); secrets the engine echoes are masked here,
    before any screen, CLI or diagnosis sees the line."""
    ts, key, text = dockerts.split(raw)
    return LogLine(ts, key, mask(text))


class Deduper:
    """Remembers the newest timestamp seen and the lines that carry it."""

    def __init__(self) -> None:
        self.last: tuple[int, int] | None = None
        self.last_ts: str | None = None
        self._at_last: Counter = Counter()
        self._skip: Counter = Counter()

    def begin_pass(self) -> None:
        """A new read starts at `last_ts`: its lines at that instant were already taken."""
        self._skip = Counter(self._at_last)

    def accept(self, line: LogLine) -> bool:
        if line.key is None:
            return True
        if self.last is not None:
            if line.key < self.last:
                return False  # before the resume point: only a clock going back could send it
            if line.key == self.last and self._skip[line.text] > 0:
                self._skip[line.text] -= 1
                return False
        if self.last is None or line.key > self.last:
            self.last, self.last_ts = line.key, line.ts
            self._at_last = Counter()
        self._at_last[line.text] += 1
        return True


async def container_state(node: Node, container: str) -> str | None:
    """docker's State.Status, "missing" when there is no such container, None when the node can't be asked."""
    r = await node.run(["docker", "inspect", "--format", "{{.State.Status}}", container], timeout=30)
    if r.ok:
        return r.stdout.strip() or "unknown"
    if r.exit_status in (255, 124):
        return None
    return "missing" if "no such" in (r.stderr + r.stdout).lower() else "unknown"


class LogFollower:
    """Streams one container's log lines to `on_lines` in small batches until the container ends.

    `run()` returns why it stopped: "exited" (read to the end), "removed", "lost" (the node stayed
    unreachable for `reconnect_timeout` seconds) or "done" (follow=False, read once).
    """

    def __init__(self, node: Node, container: str, on_lines: Callable[[list[LogLine]], None], *,
                 since: str | None = None, follow: bool = True, reconnect_timeout: float = 900.0,
                 batch_interval: float = 0.05, batch_max: int = 500):
        self.node = node
        self.container = container
        self.on_lines = on_lines
        self.since = since
        self.follow = follow
        self.reconnect_timeout = reconnect_timeout
        self.batch_interval = batch_interval
        self.batch_max = batch_max
        self.dedupe = Deduper()
        self.passes = 0  # docker logs commands run (1 + resumes)
        self.received = 0  # lines delivered
        self._buf: list[LogLine] = []
        self._timer: asyncio.TimerHandle | None = None

    def _argv(self) -> list[str]:
        argv = ["docker", "logs", "-t"]
        if self.follow:
            argv.append("-f")
        since = self.dedupe.last_ts or self.since
        if since:
            argv += ["--since", since]
        return argv + [self.container]

    def _take(self, raw: str) -> int:
        line = split_ts(raw)
        if not self.dedupe.accept(line):
            return 0
        self._buf.append(line)
        if len(self._buf) >= self.batch_max:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.batch_interval, self.flush)
        return 1

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._buf:
            batch, self._buf = self._buf, []
            self.received += len(batch)
            self.on_lines(batch)

    async def _one_pass(self) -> tuple[int, bool]:
        """(new lines, whether the read broke off with an error)."""
        self.passes += 1
        self.dedupe.begin_pass()
        got = 0
        try:
            async for raw in self.node.stream(self._argv()):
                got += self._take(raw)
                if got % 256 == 0:
                    await asyncio.sleep(0)  # a buffered flood never yields by itself: let keys through
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a dropped link surfaces as many exception types
            return got, True
        finally:
            self.flush()
        return got, False

    async def run(self) -> str:
        quiet = 0
        drained = False
        for _ in range(MAX_RESUMES):
            got, broke = await self._one_pass()
            if not self.follow and not broke:
                return "done"
            state = await container_state(self.node, self.container)
            if state is None:  # link down: wait for it (the node reconnects with backoff), then resume
                if not await self.node.wait_connected(self.reconnect_timeout):
                    return "lost"
                continue
            if state == "missing":
                return "removed"
            if state not in ("running", "restarting", "paused"):
                # One more read: a drop may have cut the last lines before the container ended.
                if drained and not broke:
                    return "exited"
                drained = True
                continue
            drained = False
            quiet = 0 if got else quiet + 1
            if quiet:
                await asyncio.sleep(RESUME_DELAYS[min(quiet - 1, len(RESUME_DELAYS) - 1)])
        return "lost"
