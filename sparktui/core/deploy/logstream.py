"""Follow one container's output with `docker logs -f -t`, resuming after a dropped link.

A resumed read asks for `--since <last timestamp seen>`. Docker keeps every entry that is not
before that instant, so the lines carrying exactly that timestamp come again: the follower counts
them and skips as many, so across any number of drops no line is lost or doubled.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from itertools import islice
from operator import le
from typing import Callable, Iterator, NamedTuple

from ..diagnosis import dockerts
from ..state.events import Gate
from ..config.secrets import mask, needs_mask
from ..remote.ssh import Node

# docker logs -t: RFC3339Nano in UTC ("2026-01-02T03:04:05.123456789Z"); older clients trim zeros.

RESUME_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0)  # between resumes that brought nothing new; the last repeats
MAX_RESUMES = 2000  # a follower that keeps failing stops (with reason "lost") instead of spinning


class LogLine(NamedTuple):  # a tuple: millions are made, and a dataclass costs several times more each
    ts: str | None  # docker's timestamp as printed, None for lines docker itself wrote (errors)
    key: int | None  # unix time in nanoseconds: exact ordering for the dedupe and the screen
    text: str  # the container's line without the timestamp

    @property
    def seconds(self) -> float | None:
        return self.key / 1e9 if self.key is not None else None


class LogBatch:
    """Lines of one stream as three columns (timestamps as printed, keys, texts): a flood makes no
    object per line, and consumers that want one column (the screen: texts and keys) take it whole.
    Iterating or indexing gives LogLines."""

    __slots__ = ("ts", "keys", "texts")

    def __init__(self, ts: list[str | None], keys: list[int | None], texts: list[str]) -> None:
        self.ts, self.keys, self.texts = ts, keys, texts

    def __len__(self) -> int:
        return len(self.texts)

    def __iter__(self) -> Iterator[LogLine]:
        return map(LogLine, self.ts, self.keys, self.texts)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return LogBatch(self.ts[i], self.keys[i], self.texts[i])
        return LogLine(self.ts[i], self.keys[i], self.texts[i])

    def __repr__(self) -> str:
        return f"LogBatch({len(self)} lines)"


def split_ts(raw: str) -> LogLine:
    """A `docker logs -t` line as (timestamp, exact key, text); secrets the engine echoes are masked here,
    before any screen, CLI or diagnosis sees the line."""
    ts, key, text = dockerts.split(raw)
    return LogLine(ts, key, mask(text))


class Deduper:
    """Remembers the newest timestamp seen and the lines that carry it."""

    def __init__(self) -> None:
        self.last: int | None = None
        self.last_ts: str | None = None
        self._at_last: list[str] = []
        self._skip: Counter = Counter()

    def begin_pass(self) -> None:
        """A new read starts at `last_ts`: its lines at that instant were already taken."""
        self._skip = Counter(self._at_last)

    def accept(self, line: LogLine) -> bool:
        return bool(self.take([line]))

    def take_columns(self, ts: list, keys: list, texts: list) -> tuple[list, list, list]:
        """take() for a chunk as columns. The common chunk (all newer than anything seen, in order,
        nothing to skip) passes whole, checked at C speed; any other goes through take()."""
        last = self.last
        if (
            keys
            and not self._skip
            and None not in keys
            and (last is None or keys[0] > last)
            and all(map(le, keys, islice(keys, 1, None)))
        ):
            end = keys[-1]
            j = len(keys) - 1
            while j and keys[j - 1] == end:  # the lines at the newest instant, for the next resume
                j -= 1
            self.last, self.last_ts, self._at_last = end, ts[j], texts[j:]
            return ts, keys, texts
        kept = self.take(list(map(LogLine, ts, keys, texts)))
        return [x[0] for x in kept], [x[1] for x in kept], [x[2] for x in kept]

    def take(self, lines: list[LogLine]) -> list[LogLine]:
        """The lines not seen before, in order. One tight loop per chunk: this runs for every line."""
        last, last_ts, at_last, skip = self.last, self.last_ts, self._at_last, self._skip
        out = []
        keep = out.append
        for line in lines:
            key = line[1]
            if key is not None:
                if last is None or key > last:
                    last, last_ts, at_last = key, line[0], [line[2]]
                    if skip:
                        skip = Counter()  # the resume point is behind us
                elif key == last:
                    if skip and skip[line[2]] > 0:
                        skip[line[2]] -= 1
                        continue
                    at_last.append(line[2])
                else:
                    continue  # before the resume point: only a clock going back could send it
            keep(line)
        self.last, self.last_ts, self._at_last, self._skip = last, last_ts, at_last, skip
        return out


async def container_state(node: Node, container: str) -> str | None:
    """docker's State.Status, "missing" when there is no such container, None when the node can't be asked."""
    r = await node.run(["docker", "inspect", "--format", "{{.State.Status}}", container], timeout=30)
    if r.ok:
        return r.stdout.strip() or "unknown"
    if r.exit_status in (255, 124):
        return None
    return "missing" if "no such" in (r.stderr + r.stdout).lower() else "unknown"


class LogFollower:
    """Streams one container's log lines to `on_lines` in batches (LogBatch) until the container ends.

    The stream is read in chunks and split here, once; each line keeps docker's timestamp. With a
    `gate`, reading pauses while the consumer holds too many of this stream's lines.
    `run()` returns why it stopped: "exited" (read to the end), "removed", "lost" (the node stayed
    unreachable for `reconnect_timeout` seconds) or "done" (follow=False, read once).
    """

    def __init__(
        self,
        node: Node,
        container: str,
        on_lines: Callable[[LogBatch], None],
        *,
        since: str | None = None,
        follow: bool = True,
        reconnect_timeout: float = 900.0,
        batch_interval: float = 0.05,
        batch_max: int = 4096,
        gate: Gate | None = None,
    ):
        self.node = node
        self.container = container
        self.on_lines = on_lines
        self.since = since
        self.follow = follow
        self.reconnect_timeout = reconnect_timeout
        self.batch_interval = batch_interval
        self.batch_max = batch_max
        self.gate = gate
        self.dedupe = Deduper()
        self.passes = 0  # docker logs commands run (1 + resumes)
        self.received = 0  # lines delivered
        self._ts: list[str | None] = []  # the batch being gathered, as columns
        self._keys: list[int | None] = []
        self._texts: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        self._last_flush = 0.0

    def _argv(self) -> list[str]:
        argv = ["docker", "logs", "-t"]
        if self.follow:
            argv.append("-f")
        since = self.dedupe.last_ts or self.since
        if since:
            argv += ["--since", since]
        return argv + [self.container]

    def _take(self, raws: list[str], masked: bool | None = None) -> int:
        """Split, de-duplicate and queue complete lines; a batch goes out when it is big or old enough.
        Secrets are masked per line, and only where the lines show any (`masked`, else one search of
        their texts: whole lines, so a name cut by a chunk boundary is found, and no timestamps)."""
        ts, keys, texts = dockerts.split_many(raws)
        if masked is None:
            masked = needs_mask("\n".join(texts))
        if masked:
            texts = [mask(t) for t in texts]
        ts, keys, texts = self.dedupe.take_columns(ts, keys, texts)
        if not texts:
            return 0
        if self._texts:
            self._ts += ts
            self._keys += keys
            self._texts += texts
        else:  # fresh lists from the split: the batch can take them as they are
            self._ts, self._keys, self._texts = ts, keys, texts
        now = time.monotonic()
        if len(self._texts) >= self.batch_max or now - self._last_flush >= self.batch_interval:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.batch_interval, self.flush)
        return len(texts)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._texts:
            batch = LogBatch(self._ts, self._keys, self._texts)
            self._ts, self._keys, self._texts = [], [], []
            self._last_flush = time.monotonic()
            self.received += len(batch)
            self.on_lines(batch)

    async def _one_pass(self) -> tuple[int, bool]:
        """(new lines, whether the read broke off with an error)."""
        self.passes += 1
        self.dedupe.begin_pass()
        got = 0
        rest = ""  # a line cut by the chunk boundary; after a drop it comes again with the resume
        try:
            async for chunk in self.node.stream_chunks(self._argv()):
                parts = (rest + chunk).split("\n") if rest else chunk.split("\n")
                rest = parts.pop()
                if parts:
                    got += self._take(parts)
                if self.gate is not None and self.gate.over:
                    self.flush()
                    await self.gate.wait()
                else:
                    await asyncio.sleep(0)  # a buffered flood never yields by itself: let others in
            if rest:
                got += self._take([rest])
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
