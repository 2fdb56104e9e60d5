"""Many nodes' logs in one view: plain strings on Textual's Log, so only visible lines render.

- Arrivals are buffered and written in one batch every `flush_interval` (~50 ms): a flood of small
  writes costs one layout/refresh per batch instead of one per line.
- History is bounded per node (`max_lines`): a chatty node cannot push a quiet one's lines out.
- Following pauses when the user scrolls up; a marker counts the lines that arrived meanwhile.
  Scrolling back to the end, or `follow()`, resumes.
- A filter (case-insensitive substring) and a node selection rebuild the view from history.
- Each node has its own colour; lines that look like problems are highlighted.
"""
from __future__ import annotations

import heapq
import re
import time
from collections import deque
from typing import Iterable

from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Log, Static

NODE_COLOURS = ("#5fafff", "#d787ff", "#5fd7af", "#ffaf5f", "#ff87af", "#87d75f", "#d7d75f", "#87afd7")
# What a problem line looks like in engine logs (the diagnoser decides; this only draws the eye).
# Case matters: engines print server_args such as watchdog_timeout=300 or log_level='error' at start-up,
# and those must not light up as failures.
PROBLEM = re.compile(
    r"Traceback \(most recent call last\)|\b(?:ERROR|CRITICAL|FATAL)\b|\w+Error:|NCCL WARN|"
    r"[Oo]ut of memory|OutOfMemory|scheduler (?:died|is dead)|[Tt]imed out after|[Ww]atchdog (?:caught|timeout)"
)
SEP = " │ "
SLICE = 0.008  # seconds of line sorting per turn of the loop before keys and frames get theirs
CHUNK = 2000  # lines sorted in one go (a big batch is cut so the time check runs often enough)


class NodeHighlighter(Highlighter):
    """Colours the node prefix of each line and marks problem lines."""

    def __init__(self) -> None:
        self.styles: dict[str, Style] = {}
        self.problem = Style(color="#ff5f5f", bold=True)
        self.extra: set[str] = set()  # exact problem lines reported by the diagnoser

    def colour(self, node: str, index: int) -> None:
        self.styles[node] = Style(color=NODE_COLOURS[index % len(NODE_COLOURS)], bold=True)

    def highlight(self, text: Text) -> None:
        plain = text.plain
        cut = plain.find(SEP)
        if cut > 0:
            style = self.styles.get(plain[:cut].strip())
            if style is not None:
                text.stylize(style, 0, cut)
            body = plain[cut + len(SEP):]
            if body in self.extra or PROBLEM.search(body):
                text.stylize(self.problem, cut + len(SEP))


class _Lines(Log):
    """Log that tells its owner when the user scrolls away from the end or back to it."""

    class Scrolled(Message):
        def __init__(self, at_end: bool, upward: bool) -> None:
            super().__init__()
            self.at_end = at_end
            self.upward = upward

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Scrolled(new_value >= self.max_scroll_y, new_value < old_value))


class LogView(Vertical):
    """Merged or per-node log lines with batching, bounded history, follow/pause and a filter."""

    DEFAULT_CSS = """
    LogView { height: 1fr; }
    LogView > _Lines { height: 1fr; }
    LogView > #marker { height: 1; display: none; background: $warning-muted; color: $text; padding: 0 1; }
    LogView.-paused > #marker { display: block; }
    """

    following: reactive[bool] = reactive(True)
    new_lines: reactive[int] = reactive(0)

    class FollowChanged(Message):
        def __init__(self, view: "LogView", following: bool) -> None:
            super().__init__()
            self.view = view
            self.following = following

    def __init__(self, max_lines: int = 10_000, flush_interval: float = 0.05, nodes: Iterable[str] = (),
                 *, backlog: int | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.max_lines = max_lines
        self.flush_interval = flush_interval
        self.highlighter = NodeHighlighter()
        self.backlog = backlog if backlog is not None else 20 * max_lines
        self._next_seq = 0
        self._history: dict[str, deque[tuple[int, str]]] = {}
        self._inbox: deque[tuple[str, list[str]]] = deque()  # batches as they came, not yet sorted in
        self._inbox_lines = 0
        self._pending: deque[str] = deque(maxlen=max_lines)  # lines above max_lines would be pruned anyway
        self._scheduled = False
        self._width = 4
        self.filter_text = ""
        self.node: str | None = None  # None = every node
        self.received = 0  # lines accepted in total (for benchmarks and the status line)
        self.flushes = 0
        self.dropped = 0  # lines shed by back-pressure before they were shown
        for n in nodes:
            self._add_node(n)

    def compose(self) -> ComposeResult:
        log = _Lines(max_lines=self.max_lines, highlight=True, auto_scroll=False)
        log.highlighter = self.highlighter
        yield log
        yield Static(id="marker")

    @property
    def log(self) -> _Lines:
        return self.query_one(_Lines)

    # -- nodes and input --------------------------------------------------------------------
    def _add_node(self, node: str) -> None:
        if node in self._history:
            return
        self._history[node] = deque(maxlen=self.max_lines)
        self.highlighter.colour(node, len(self._history) - 1)
        self._width = max(self._width, len(node))

    @property
    def nodes(self) -> list[str]:
        return list(self._history)

    def _format(self, node: str, text: str) -> str:
        return f"{node:<{self._width}}{SEP}{text}"

    def _visible(self, node: str, text: str) -> bool:
        return not self.filter_text or self.filter_text in text.lower()

    def add(self, node: str, lines: Iterable[str]) -> None:
        """Queue lines from `node`: O(1) here; they are sorted in and shown at the next flush."""
        batch = lines if isinstance(lines, list) else list(lines)
        if not batch:
            return
        self._inbox.append((node, batch))
        self._inbox_lines += len(batch)
        if self._inbox_lines > self.backlog:
            self._shed()
        if not self._scheduled:
            self._scheduled = True
            self.set_timer(self.flush_interval, self._flush)

    def _shed(self) -> None:
        """Back-pressure: when arrivals outrun the screen, the oldest queued lines are dropped (and counted)."""
        while self._inbox_lines > self.backlog and len(self._inbox) > 1:
            _, old = self._inbox.popleft()
            self._inbox_lines -= len(old)
            self.dropped += len(old)

    def _take(self, node: str, batch: list[str]) -> None:
        """Sort one batch into history and the pending view, with as little per-line work as possible."""
        self._add_node(node)
        if any("\r" in t for t in batch):  # Log.write would split on \r anyway; keep history and view alike
            batch = [part for t in batch for part in t.split("\r") if part]
        first = self._next_seq
        self._next_seq += len(batch)
        self._history[node].extend(zip(range(first, self._next_seq), batch))
        self.received += len(batch)
        if self.node is not None and node != self.node:
            return
        shown = batch if not self.filter_text else [t for t in batch if self.filter_text in t.lower()]
        prefix = f"{node:<{self._width}}{SEP}"
        self._pending.extend(prefix + t for t in shown)

    def mark_problem(self, text: str) -> None:
        """Highlight this exact line (a diagnoser finding) even when it does not look like an error."""
        self.highlighter.extra.add(text.rstrip("\r\n"))
        self.log.refresh()

    def _flush(self, budget: float | None = SLICE) -> None:
        """Process the inbox for at most `budget` seconds, write to the Log, and come back for the rest:
        a flood is handled in slices, so key presses and frames get the loop in between."""
        self._scheduled = False
        deadline = time.perf_counter() + budget if budget is not None else None
        while self._inbox:
            node, batch = self._inbox.popleft()
            if len(batch) > CHUNK and deadline is not None:
                self._inbox.appendleft((node, batch[CHUNK:]))
                batch = batch[:CHUNK]
            self._inbox_lines -= len(batch)
            self._take(node, batch)
            if deadline is not None and time.perf_counter() > deadline:
                break
        if self._pending:
            batch = list(self._pending)
            self._pending.clear()
            self.flushes += 1
            log = self.log
            log.write_lines(batch, scroll_end=False)
            if self.following:
                log.scroll_end(animate=False, immediate=True, x_axis=False)
            else:
                self.new_lines += len(batch)
        if self._inbox and not self._scheduled:
            self._scheduled = True
            self.call_later(self._flush)  # after whatever else waits (keys, refreshes)

    def flush_now(self) -> None:
        """Process and write everything queued at once (tests, a rebuild, shutdown)."""
        self._flush(budget=None)

    # -- view -------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        """Rewrite the view from history for the current node and filter (the last max_lines matches)."""
        self.flush_now()  # everything queued joins history first
        self._pending.clear()
        names = [self.node] if self.node is not None else list(self._history)
        streams = [self._tagged(n) for n in names]
        matches = deque((self._format(n, t) for _, n, t in heapq.merge(*streams) if self._visible(n, t)),
                        maxlen=self.max_lines)
        log = self.log
        log.clear()
        log.write_lines(list(matches), scroll_end=False)
        self.new_lines = 0
        if self.following:
            log.scroll_end(animate=False, immediate=True, x_axis=False)

    def _tagged(self, node: str):
        return ((seq, node, text) for seq, text in self._history.get(node, ()))

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._rebuild()

    def show_node(self, node: str | None) -> None:
        self.node = node
        self._rebuild()

    def follow(self, on: bool = True) -> None:
        self.following = on
        if on:
            self.new_lines = 0
            self.log.scroll_end(animate=False, immediate=True, x_axis=False)

    def toggle_follow(self) -> None:
        self.follow(not self.following)

    def watch_following(self, following: bool) -> None:
        self.set_class(not following, "-paused")
        self._update_marker()
        self.post_message(self.FollowChanged(self, following))

    def watch_new_lines(self, _: int) -> None:
        self._update_marker()

    def _update_marker(self) -> None:
        if not self.is_mounted:
            return
        n = self.new_lines
        words = f"▼ {n:,} new line{'s' if n != 1 else ''}" if n else "paused"
        if self.dropped:
            words += f" ({self.dropped:,} dropped while the screen caught up)"
        self.query_one("#marker", Static).update(f"{words} — press f to follow")

    @on(_Lines.Scrolled)
    def _scrolled(self, event: _Lines.Scrolled) -> None:
        event.stop()
        if event.upward and not event.at_end and self.following:
            self.following = False
        elif event.at_end and not self.following:
            self.follow(True)

    @property
    def shown(self) -> list[str]:
        """The lines in the view now (after filters), for tests and the status line."""
        return list(self.log.lines)

    def history(self, node: str) -> list[str]:
        return [t for _, t in self._history.get(node, ())]
