"""Journal pane: every remote command that ran, newest at the bottom (Journal.listeners feed it);
Enter on a row shows the whole entry."""

from __future__ import annotations

from textual.widgets import DataTable

from ...core.state.journal import Entry
from ..present.journal import COLUMNS, entry_cells
from ..routing import handles

KEEP = 2000  # rows kept on screen; the journal file keeps everything


class JournalPane(DataTable):
    def __init__(self, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self._keys: list = []
        self._entries: dict = {}  # row key -> the entry it shows

    def on_mount(self) -> None:
        self.add_columns(*COLUMNS)

    @handles(Entry)
    def add_entry(self, e: Entry) -> None:
        at_end = self.cursor_row >= self.row_count - 1
        width = max(40, self.size.width - 40) if self.size.width else 60  # the other columns take ~40
        key = self.add_row(*entry_cells(e, width))
        self._keys.append(key)
        self._entries[key] = e
        if len(self._keys) > KEEP:
            old = self._keys.pop(0)
            self.remove_row(old)
            self._entries.pop(old, None)
        if at_end:
            self.move_cursor(row=self.row_count - 1, animate=False)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        entry = self._entries.get(event.row_key)
        if entry is not None:
            from ..screens.entry import EntryScreen

            self.app.push_screen(EntryScreen(entry))
