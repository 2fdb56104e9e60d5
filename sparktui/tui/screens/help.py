"""`?`: every key from the registry, after the user's keymap, and why a key cannot act now.

The notes wrap inside their column and the list scrolls, so nothing is cut at 80x24.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

NOTES = (
    "Keys that cannot act now are greyed out in the footer; pressed anyway, they say why. "
    "ctrl+p lists every action too. Remap a key with keymap: {ID: KEY} in the config."
)


def help_table(rows: list[tuple[str, str, str, str]]) -> Table:
    t = Table(box=None, expand=True, padding=(0, 1), show_edge=False, header_style="bold")
    t.add_column("key", no_wrap=True)
    t.add_column("does", no_wrap=True)
    t.add_column("id", no_wrap=True, style="dim")
    t.add_column("note", overflow="fold", ratio=1)
    for keys, does, ident, note in rows:
        t.add_row(Text(keys, style="bold"), Text(does), Text(ident), Text(note))
    return t


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen #help-body { width: 90; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; border-title-align: left; background: $surface; padding: 0 0 0 1;
        scrollbar-gutter: stable; scrollbar-size-vertical: 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    def __init__(self, rows: list[tuple[str, str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body") as body:
            body.border_title = "Keys (↑↓ scroll, esc closes)"
            yield Static(help_table(self.rows), id="help-table")
            yield Static(Text(NOTES, style="dim"), id="help-notes")

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
