"""Transfers pane: one bar per destination (model and image), with rate, ETA, state and verify result."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from ...core.state.events import TransferProgress
from ..ids import widget_id
from ..routing import handles
from ..present.transfers import key, summary, transfer_lines

HINT = "t sync the model to every node · i sync the engine image"


class TransferRow(Static):
    DEFAULT_CSS = "TransferRow { height: auto; margin-bottom: 1; }"


class TransfersPane(Vertical):
    DEFAULT_CSS = """
    TransfersPane > #transfers-title { height: 1; color: $text-muted; }
    TransfersPane > VerticalScroll { height: 1fr; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.transfers: dict[str, TransferProgress] = {}

    def compose(self) -> ComposeResult:
        yield Static(f"no transfers — {HINT}", id="transfers-title")
        yield VerticalScroll(id="transfer-rows")

    @handles(TransferProgress)
    def update_transfer(self, t: TransferProgress) -> None:
        if t.dest == "-":  # a note about the whole sync (fabric addresses), not a destination
            self.query_one("#transfers-title", Static).update(t.message or "")
            return
        k = key(t)
        self.transfers[k] = t
        rows = self.query_one("#transfer-rows", VerticalScroll)
        wid = widget_id("tr", k)
        found = rows.query(f"#{wid}")
        if found:
            found.first(TransferRow).update(transfer_lines(t, self._width()))
        else:
            rows.mount(TransferRow(transfer_lines(t, self._width()), id=wid))
        self.query_one("#transfers-title", Static).update(f"{summary(list(self.transfers.values()))} — {HINT}")

    def _width(self) -> int:
        # a pane not shown yet has no size: draw for the terminal's width, redrawn on the first resize
        return max(40, (self.size.width or self.app.size.width) - 2)

    def on_resize(self) -> None:
        """Bars are drawn to the pane's width: draw them again when it changes."""
        rows = self.query_one("#transfer-rows", VerticalScroll)
        for k, t in self.transfers.items():
            found = rows.query(f"#{widget_id('tr', k)}")
            if found:
                found.first(TransferRow).update(transfer_lines(t, self._width()))
