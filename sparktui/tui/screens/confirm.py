"""Ask before a dangerous operation, naming what stops and starts on which node.

An optional third answer (alt) offers another way out, e.g. dropping the page cache instead of
launching past a failed memory check; the dialog then answers "alt"."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...core.deploy.operations import Preview as OpPreview


class ConfirmScreen(ModalScreen["bool | str"]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 76; max-width: 100%; height: auto; max-height: 90%;
        border: thick $error; background: $surface; padding: 0 1; }
    ConfirmScreen #confirm-title { text-style: bold; color: $error; }
    ConfirmScreen VerticalScroll { height: auto; max-height: 14; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("escape,n", "cancel", "Cancel", id="confirm.cancel"),
        Binding("y", "ok", "Yes", id="confirm.ok"),
        Binding("d", "alt", "Other", id="confirm.alt"),
    ]

    def __init__(self, preview: OpPreview, verb: str, alt: str | None = None) -> None:
        super().__init__()
        self.preview = preview  # anything with a title and lines(): a deploy Preview, a DropPreview
        self.verb = verb
        self.alt = alt  # the third button's words; its key is d

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.preview.title + "?", id="confirm-title")
            with VerticalScroll():
                yield Static("\n".join(self.preview.lines()) or "nothing runs now", id="confirm-body", markup=False)
            with Horizontal():
                yield Button("Cancel (n)", id="cancel", compact=True)
                if self.alt:
                    yield Button(f"{self.alt} (d)", id="alt", variant="primary", compact=True)
                yield Button(f"{self.verb} (y)", id="ok", variant="error", compact=True)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # the safe choice has the focus

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss("alt" if event.button.id == "alt" else event.button.id == "ok")

    def action_alt(self) -> None:
        if self.alt:
            self.dismiss("alt")

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_ok(self) -> None:
        self.dismiss(True)
