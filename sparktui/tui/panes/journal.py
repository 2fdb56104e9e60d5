"""Journal pane: every remote command that ran, newest at the bottom (Journal.listeners feed it)."""
from __future__ import annotations

from textual.widgets import DataTable

from ...core.journal import Entry
from ..present.journal import COLUMNS, entry_cells

KEEP = 2000  # rows kept on screen; the journal file keeps everything


class JournalPane(DataTable):
    def __init__(self, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self._keys: list = []

    def on_mount(self) -> None:
        self.add_columns(*COLUMNS)

    def add_entry(self, e: Entry) -> None:
        at_end = self.cursor_row >= self.row_count - 1
        width = max(40, self.size.width - 40) if self.size.width else 60  # the other columns take ~40
        self._keys.append(self.add_row(*entry_cells(e, width)))
        if len(self._keys) > KEEP:
            self.remove_row(self._keys.pop(0))
        if at_end:
            self.move_cursor(row=self.row_count - 1, animate=False)
