"""The first-run app: the setup screen alone, ending with the path of the config it wrote (or None)."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from ..core.config.config import SshConfig
from ..core.state.journal import Journal
from .screens.setup import SetupScreen


class SetupApp(App[Path | None]):
    TITLE = "sparktui setup"
    # shown, unlike Textual's own ctrl+q: leaving is safe (nothing is written before ctrl+s)
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True, id="setup.quit")]

    def __init__(self, target: Path, ssh: SshConfig | None = None, journal: Journal | None = None) -> None:
        super().__init__()
        self.target = target
        self.ssh = ssh
        self.journal = journal

    def on_mount(self) -> None:
        self.push_screen(SetupScreen(self.target, self.ssh, self.journal), callback=self.exit)
