"""Many nodes' logs in one view: one bounded ring of lines, drawn a screen at a time.

- Each line is stored once (its sort key, node and text, in a Ring: log_ring.py); the screen
  formats and highlights only the rows it shows. Nodes are merged by docker's timestamps (arrival order where a line has none).
- Arrivals are queued and sorted in every `flush_interval` (~50 ms), in slices of a few ms, so keys
  and frames never wait behind a flood; new lines repaint the view at most every `REPAINT` seconds.
  A batch that came with an `ack` is acknowledged once it is in the ring: the reader on the node holds
  back while too many of its lines wait here.
- The ring keeps the last `max_lines` lines; the top row then says how many were dropped.
- Following pauses when the user scrolls up; the bottom row counts the lines that arrived meanwhile.
  Scrolling back to the end, or `follow()`, resumes. Nothing here changes the layout, so a flood
  costs no relayout.
- A filter (case-insensitive words; `node:NAME` picks nodes) and a node tab narrow the view.
"""

from __future__ import annotations

import asyncio
import re
import time
from bisect import bisect_left
from collections import deque
from itertools import repeat
from operator import contains
from typing import Callable, Iterable

from rich.highlighter import Highlighter
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from .log_filter import LogFilter
from .log_ring import Ring

NODE_COLOURS = ("#5fafff", "#d787ff", "#5fd7af", "#ffaf5f", "#ff87af", "#87d75f", "#d7d75f", "#87afd7")
# What a problem line looks like in engine logs (the diagnoser decides; this only draws the eye).
# Case matters: engines print server_args such as watchdog_timeout=300 or log_level='error' at start-up,
# and those must not light up as failures.
PROBLEM = re.compile(
    r"Traceback \(most recent call last\)|\b(?:ERROR|CRITICAL|FATAL)\b|\w+Error:|NCCL WARN|"
    r"[Oo]ut of memory|OutOfMemory|scheduler (?:died|is dead)|[Tt]imed out after|[Ww]atchdog (?:caught|timeout)"
)
SEP = " │ "
SLICE = 0.004  # seconds of sorting-in per turn of the loop before keys and frames get theirs
CHUNK = 2000  # lines sorted in at once (a big batch is cut so the time check runs often enough)
REORDER = 2_000  # a late line is placed by its timestamp among at most this many newest lines
# Seconds between repaints for new lines. Each is a full render of the view (5-6 ms of the screen's
# interpreter time for 40 rows): at the screen's frame rate a flood spent about 40 % of the screen's
# time drawing rows no one can read, time the readers and the keys then waited for.
REPAINT = 0.1
_CONTROL = re.compile("[\u0000-\u0008\u000b-\u001f\t]")


class NodeHighlighter(Highlighter):
    """Node colours and problem lines (also usable on a whole `node │ text` Text)."""

    def __init__(self) -> None:
        self.styles: dict[str, Style] = {}
        self.problem = Style(color="#ff5f5f", bold=True)
        self.extra: set[str] = set()  # exact problem lines reported by the diagnoser

    def colour(self, node: str, index: int) -> None:
        self.styles[node] = Style(color=NODE_COLOURS[index % len(NODE_COLOURS)], bold=True)

    def is_problem(self, body: str) -> bool:
        return body in self.extra or PROBLEM.search(body) is not None

    def highlight(self, text: Text) -> None:
        plain = text.plain
        cut = plain.find(SEP)
        if cut > 0:
            style = self.styles.get(plain[:cut].strip())
            if style is not None:
                text.stylize(style, 0, cut)
            if self.is_problem(plain[cut + len(SEP) :]):
                text.stylize(self.problem, cut + len(SEP))


class _Lines(ScrollView, can_focus=True):
    """Draws the owner's ring: only the rows on screen are formatted and highlighted."""

    DEFAULT_CSS = """
    _Lines { background: $surface; color: $text; overflow: scroll; }
    _Lines:focus { background-tint: $foreground 5%; }
    """

    class Scrolled(Message):
        def __init__(self, at_end: bool, upward: bool) -> None:
            super().__init__()
            self.at_end = at_end
            self.upward = upward

    def __init__(self, owner: "LogView") -> None:
        super().__init__()
        self.owner = owner
        self._cache: dict[int, Strip] = {}  # rendered rows by ring position, for the rows on screen
        self._style: Style | None = None  # the widget's own style: costly to compute, asked per row

    def forget(self) -> None:
        self._cache.clear()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._style = None

    def set_rows(self, rows: int, width: int) -> None:
        """New content size without a relayout: the scrollbars are always there (overflow: scroll),
        so nothing around the view moves; only this widget repaints."""
        size = Size(width, rows)
        if size != self.virtual_size:
            self.set_reactive(Widget.virtual_size, size)
            self._scroll_update(size)
        self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Scrolled(new_value >= self.max_scroll_y, new_value < old_value))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self._style
        if base is None:
            base = self._style = self.rich_style
        owner = self.owner
        if not owner.following and y == self.scrollable_content_region.height - 1:
            return self._plain(owner.marker_text(), base + owner.marker_style, width)
        row = round(self.scroll_y) + y
        if owner.dropped_top and row == 0:
            return self._plain(owner.dropped_text(), base + owner.notice_style, width)
        pos = owner.position(row - (1 if owner.dropped_top else 0))
        if pos is None:
            return Strip.blank(width, base)
        strip = self._cache.get(pos)
        if strip is None:
            if len(self._cache) > 4 * max(self.size.height, 10):
                self._cache.clear()
            strip = self._cache[pos] = self._row(pos, base)
        x = round(self.scroll_x)
        return strip.crop_extend(x, x + width, base)

    def _row(self, pos: int, base: Style) -> Strip:
        node, text = self.owner.entry(pos)
        hl = self.owner.highlighter
        if _CONTROL.search(text):
            text = _CONTROL.sub("\ufffd", text.expandtabs())
        style = hl.styles.get(node)
        body = base + hl.problem if hl.is_problem(text) else base
        return Strip(
            [
                Segment(f"{node:<{self.owner.name_width}}", base + style if style else base),
                Segment(SEP, base),
                Segment(text, body),
            ]
        )

    @staticmethod
    def _plain(words: str, style: Style, width: int) -> Strip:
        return Strip([Segment(words, style)]).crop_extend(0, width, style)


class LogView(Vertical):
    """Merged or per-node log lines: one ring, batching, follow/pause and a filter."""

    DEFAULT_CSS = """
    LogView { height: 1fr; }
    LogView > _Lines { height: 1fr; }
    """

    following: reactive[bool] = reactive(True)
    new_lines: reactive[int] = reactive(0, always_update=True)

    class FollowChanged(Message):
        def __init__(self, view: "LogView", following: bool) -> None:
            super().__init__()
            self.view = view
            self.following = following

    def __init__(
        self,
        max_lines: int = 100_000,
        flush_interval: float = 0.05,
        nodes: Iterable[str] = (),
        *,
        backlog: int | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.max_lines = max_lines
        self.flush_interval = flush_interval
        self.highlighter = NodeHighlighter()
        self.marker_style = Style(color="black", bgcolor="#d7af5f")
        self.notice_style = Style(dim=True, italic=True)
        self.backlog = backlog if backlog is not None else max(2 * max_lines, 50_000)
        self._ring = Ring(block=max(16, min(4096, max_lines // 8)), reorder=REORDER)
        self._node_names: list[str] = []
        self._node_ix: dict[str, int] = {}
        self._last_key: dict[int, int] = {}  # per node: for its lines without a timestamp
        self._rshown: list[int] | None = None  # positions matching the node tab and filter; None = all
        self._inbox: deque[tuple[int, list, list[str], Callable[[], None] | None]] = deque()
        self._inbox_lines = 0
        self._scheduled = False
        self._shown_at = 0.0  # when new lines were last shown (perf_counter)
        self._held: tuple[int, int] | None = None  # (rows before, rows removed) not shown yet
        self._show_timer = None
        self._wide = 0  # longest text seen (characters), for the horizontal scroll range
        self.name_width = 4
        self.filter = LogFilter()
        self.node: str | None = None  # the node tab; None = every node
        self.received = 0  # lines accepted in total (for benchmarks and the status line)
        self.flushes = 0
        self.dropped = 0  # lines shed before the ring took them (a source without back-pressure)
        self.dropped_top = 0  # lines pushed out of the top of the ring
        for n in nodes:
            self._add_node(n)

    def compose(self) -> ComposeResult:
        yield _Lines(self)

    @property
    def log(self) -> _Lines:
        return self.query_one(_Lines)

    @property
    def filter_text(self) -> str:
        return self.filter.text

    # -- nodes and input --------------------------------------------------------------------
    def _add_node(self, node: str) -> int:
        ix = self._node_ix.get(node)
        if ix is None:
            ix = self._node_ix[node] = len(self._node_names)
            self._node_names.append(node)
            self.highlighter.colour(node, ix)
            self.name_width = max(self.name_width, len(node))
        return ix

    @property
    def nodes(self) -> list[str]:
        return list(self._node_names)

    def add(
        self, node: str, lines: Iterable[str], stamps: list | None = None, ack: Callable[[], None] | None = None
    ) -> None:
        """Queue lines from `node` (with docker's time per line in ns when known): O(1) here; they are
        sorted in at the next flush, and `ack` is called then."""
        batch = lines if isinstance(lines, list) else list(lines)
        if not batch:
            if ack is not None:
                ack()
            return
        self._inbox.append((self._add_node(node), stamps, batch, ack))
        self._inbox_lines += len(batch)
        if self._inbox_lines > self.backlog:
            self._shed()
        if not self._scheduled:
            self._scheduled = True
            self.set_timer(self.flush_interval, self._flush)

    def _shed(self) -> None:
        """A source without back-pressure outran the screen: its oldest queued lines go (and are counted)."""
        while self._inbox_lines > self.backlog and len(self._inbox) > 1:
            _, _, old, ack = self._inbox.popleft()
            self._inbox_lines -= len(old)
            self.dropped += len(old)
            if ack is not None:
                ack()

    def _stamped(self, ix: int, stamps: list | None, texts: list[str]) -> list:
        """Sort keys for a batch: docker's timestamps, and for lines without one the key before them."""
        newest = self._ring.last_key
        prev = self._last_key.get(ix) or newest or 0
        if stamps is None or len(stamps) != len(texts):
            keys = [newest or prev] * len(texts)
        elif None in stamps:
            keys = []
            for k in stamps:
                prev = k if k is not None else prev
                keys.append(prev)
        else:
            keys = stamps
        self._last_key[ix] = keys[-1]
        return keys

    def _trim(self) -> int:
        """Drop from the top beyond max_lines (in steps, so this is rare); returns rows removed from the view."""
        over = len(self._ring) - self.max_lines
        if over <= max(1, self.max_lines // 8):
            return 0
        self._ring.drop(over)
        self.dropped_top += over
        if self._rshown is None:
            return over
        cut = bisect_left(self._rshown, self._ring.base)
        del self._rshown[:cut]
        return cut

    def _matches(self, start: int) -> list[int]:
        """Positions from `start` on that the node tab and the filter let through."""
        flt, want = self.filter, (self._node_ix.get(self.node, -1) if self.node is not None else None)
        nodes_ok = flt.node_indexes(self._node_names)
        if want is not None:
            nodes_ok = {want} if nodes_ok is None else nodes_ok & {want}
        words = flt.words
        start = max(start, self._ring.base)
        out = []
        for pos, (node, text) in enumerate(self._ring.rows_from(start), start):
            if nodes_ok is not None and node not in nodes_ok:
                continue
            if words and not flt.match(text):
                continue
            out.append(pos)
        return out

    def mark_problem(self, text: str) -> None:
        """Highlight this exact line (a diagnoser finding) even when it does not look like an error."""
        self.highlighter.extra.add(text.rstrip("\r\n"))
        if self.is_mounted:
            self.log.forget()
            self.log.refresh()

    def _flush(self, budget: float | None = SLICE) -> None:
        """Sort queued batches in for at most `budget` seconds, then repaint, and come back for the
        rest: a flood is handled in slices, so key presses and frames get the loop in between."""
        self._scheduled = False
        deadline = time.perf_counter() + budget if budget is not None else None
        rows_before = self.rows
        changed: int | None = None
        removed = 0
        while self._inbox:
            parts, acks, taken = [], [], 0
            while self._inbox and taken < CHUNK:
                ix, stamps, batch, ack = self._inbox.popleft()
                room = CHUNK - taken
                if len(batch) > room and deadline is not None:
                    # A slice sorts in at most CHUNK lines: the rest of a big batch (and its ack) waits
                    # for the next one, so no slice outlasts the budget by much.
                    rest = None if stamps is None or len(stamps) != len(batch) else stamps[room:]
                    self._inbox.appendleft((ix, rest, batch[room:], ack))
                    stamps = None if rest is None else stamps[:room]
                    batch, ack = batch[:room], None
                self._inbox_lines -= len(batch)
                if any(map(contains, batch, repeat("\r"))):  # progress bars: each \r-separated part is a line
                    pairs = [
                        (k, p) for k, t in zip(self._stamped(ix, stamps, batch), batch) for p in t.split("\r") if p
                    ]
                    batch, stamps = [p for _, p in pairs], [k for k, _ in pairs]
                    if not batch:
                        continue
                parts.append((ix, self._stamped(ix, stamps, batch), batch))
                acks.append(ack)
                taken += len(batch)
                self._wide = max(self._wide, max(map(len, batch)))
            if parts:
                at = self._ring.add(parts)
                self.received += taken
                changed = at if changed is None else min(changed, at)
                if self._rshown is not None:
                    del self._rshown[bisect_left(self._rshown, at) :]
                    self._rshown += self._matches(at)
                removed += self._trim()
            for ack in acks:
                if ack is not None:
                    ack()
            if deadline is not None and time.perf_counter() > deadline:
                break
        if changed is not None:
            self.flushes += 1
            self._show_soon(rows_before, removed, at_once=budget is None)
        if self._inbox and not self._scheduled:
            self._scheduled = True
            # Through the event loop, not call_later: a callback this widget posts to itself runs
            # before the loop gets control back, so slices would follow each other with no key or
            # frame in between.
            asyncio.get_running_loop().call_soon(self._next_slice)

    def _next_slice(self) -> None:
        if not self.is_running:
            return
        try:
            self._flush()
        except Exception as error:  # noqa: BLE001 - as a handler's error would be: the app reports it
            self.app._handle_exception(error)

    def _show_soon(self, rows_before: int, removed: int, at_once: bool) -> None:
        """Show new lines now, or once REPAINT has passed since the last time (what comes meanwhile
        joins them)."""
        if self._held is not None:
            rows_before, removed = self._held[0], self._held[1] + removed
        if self.is_mounted:
            self.log.forget()  # a late line may have been sorted in among rows already drawn
        wait = self._shown_at + REPAINT - time.perf_counter()
        if at_once or wait <= 0:
            self._show_held_drop()
            self._show(rows_before, removed)
            return
        self._held = (rows_before, removed)
        if self._show_timer is None:
            self._show_timer = self.set_timer(wait, self._show_held)

    def _show_held(self) -> None:
        self._show_timer = None
        if self._held is not None:
            rows_before, removed = self._held
            self._held = None
            self._show(rows_before, removed)

    def _show_held_drop(self) -> None:
        """Forget new lines held for the next repaint (they are being shown now)."""
        self._held = None
        if self._show_timer is not None:
            self._show_timer.stop()
            self._show_timer = None

    def _show(self, rows_before: int, removed: int) -> None:
        self._shown_at = time.perf_counter()
        if not self.is_mounted:
            return
        lines = self.log
        lines.forget()
        rows = self.rows
        lines.set_rows(rows + (1 if self.dropped_top else 0), self._wide + self.name_width + len(SEP))
        if self.following:
            lines.scroll_to(y=lines.max_scroll_y, animate=False, immediate=True)
        else:
            if removed:  # keep the reader's place when the top of the ring goes
                lines.scroll_to(y=max(0, lines.scroll_y - removed), animate=False, immediate=True)
            self.new_lines += max(0, rows - rows_before + removed)

    def flush_now(self) -> None:
        """Sort in everything queued at once (tests, a rebuild, shutdown)."""
        self._flush(budget=None)

    # -- reading the ring -------------------------------------------------------------------
    @property
    def rows(self) -> int:
        """Lines in the view now (after the node tab and filter)."""
        return len(self._ring) if self._rshown is None else len(self._rshown)

    def position(self, row: int) -> int | None:
        if row < 0:
            return None
        if self._rshown is None:
            return self._ring.base + row if row < len(self._ring) else None
        return self._rshown[row] if row < len(self._rshown) else None

    def entry(self, pos: int) -> tuple[str, str]:
        node, text = self._ring.get(pos)
        return self._node_names[node], text

    def _format(self, node: str, text: str) -> str:
        return f"{node:<{self.name_width}}{SEP}{text}"

    @property
    def shown(self) -> list[str]:
        """The lines in the view now (after filters), for tests and the status line."""
        return [self._format(*self.entry(self.position(r))) for r in range(self.rows)]

    def history(self, node: str) -> list[str]:
        ix = self._node_ix.get(node)
        return [t for n, t in self._ring.rows_from(self._ring.base) if n == ix]

    def marker_text(self) -> str:
        n = self.new_lines
        words = f"▼ {n:,} new line{'s' if n != 1 else ''}" if n else "paused"
        if self.dropped:
            words += f" ({self.dropped:,} dropped while the screen caught up)"
        return f" {words} — press f to follow"

    def dropped_text(self) -> str:
        return (
            f" … {self.dropped_top:,} earlier lines dropped from the top (the view keeps the last {self.max_lines:,})"
        )

    # -- view -------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        """Recompute which lines show for the current node tab and filter."""
        self.flush_now()
        narrowed = self.node is not None or not self.filter.empty
        self._rshown = self._matches(self._ring.base) if narrowed else None
        self.new_lines = 0
        self._show_held_drop()
        if self.is_mounted:
            self._show(self.rows, 0)
            if not self.following:
                self.log.refresh()

    def set_filter(self, text: str) -> None:
        self.filter = LogFilter.parse(text)
        self._rebuild()

    def show_node(self, node: str | None) -> None:
        self.node = node
        self._rebuild()

    def follow(self, on: bool = True) -> None:
        self.following = on
        if on:
            self.new_lines = 0
            if self.is_mounted:
                lines = self.log
                lines.scroll_to(y=lines.max_scroll_y, animate=False, immediate=True)

    def toggle_follow(self) -> None:
        self.follow(not self.following)

    def watch_following(self, following: bool) -> None:
        if self.is_mounted:
            self.log.refresh()
        self.post_message(self.FollowChanged(self, following))

    def watch_new_lines(self, _: int) -> None:
        if self.is_mounted and not self.following:
            lines = self.log
            lines.refresh_line(round(lines.scroll_y) + lines.scrollable_content_region.height - 1)

    @on(_Lines.Scrolled)
    def _scrolled(self, event: _Lines.Scrolled) -> None:
        event.stop()
        if event.upward and not event.at_end and self.following:
            self.following = False
        elif event.at_end and not self.following:
            self.follow(True)
