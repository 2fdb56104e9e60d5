"""Enter on a journal row: the whole entry (the row cuts the command to the pane's width)."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...core.state.journal import Entry
from ..present import fmt
from ..present.journal import exit_cell


def entry_text(e: Entry) -> Content:
    """Every field of the entry, the command as recorded (secrets already masked), nothing cut."""
    took = (
        fmt.duration(e.duration)
        if e.duration is not None and e.duration >= 1
        else (f"{e.duration * 1000:.0f}ms" if e.duration is not None else "still running")
    )
    rows: list[Content] = [
        Content.assemble(("node     ", "bold"), e.node + (f"  (cluster {e.cluster})" if e.cluster else "")),
        Content.assemble(("started  ", "bold"), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.started))),
        Content.assemble(("took     ", "bold"), took),
        Content.assemble(("exit     ", "bold"), exit_cell(e)),
    ]
    if e.error:
        rows.append(Content.assemble(("error    ", "bold"), (e.error, "$error")))
    rows.append(Content.styled("command", "bold"))
    rows.append(Content(e.command))  # Content, not markup: a command's [brackets] show as written
    return Content("\n").join(rows)


class EntryScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    EntryScreen { align: center middle; }
    EntryScreen #entry-body { width: 100; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; border-title-align: left; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close", id="entry.close")]

    def __init__(self, entry: Entry) -> None:
        super().__init__()
        self.entry = entry

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="entry-body") as body:
            body.border_title = "Journal entry (↑↓ scroll, esc closes)"
            yield Static(entry_text(self.entry), id="entry-text")

    def on_mount(self) -> None:
        self.query_one("#entry-body").focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
