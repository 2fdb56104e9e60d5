"""`?`: every key from the registry, after the user's keymap, and why a key cannot act now."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 78; max-width: 100%; height: auto; max-height: 95%;
        border: round $accent; background: $surface; padding: 0 1; }
    HelpScreen DataTable { height: auto; max-height: 18; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    def __init__(self, rows: list[tuple[str, str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("[b]Keys[/b]  (remap with keymap: in the config; ctrl+p lists them too)")
            table = DataTable(cursor_type="row", id="help-table")
            table.add_columns("key", "does", "id", "note")
            for row in self.rows:
                table.add_row(*row)
            yield table

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
