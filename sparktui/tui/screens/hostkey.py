"""An unknown host key, shown with its fingerprint: trusting it is the user's explicit choice."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...core.config.firstrun import HostKey


def key_file_hint(algorithm: str) -> str:
    """Where the node keeps this key type: ssh-ed25519 -> ssh_host_ed25519_key.pub, ecdsa-* -> ecdsa."""
    kind = algorithm.removeprefix("ssh-").split("-")[0]
    return f"/etc/ssh/ssh_host_{kind}_key.pub"


class HostKeyScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    HostKeyScreen { align: center middle; }
    HostKeyScreen > Vertical { width: 78; max-width: 100%; height: auto; max-height: 100%;
        border: thick $warning; background: $surface; padding: 0 1; }
    HostKeyScreen #hostkey-title { text-style: bold; color: $warning; }
    HostKeyScreen #hostkey-fp { text-style: bold; padding: 1 0; }
    HostKeyScreen Horizontal { height: auto; align-horizontal: right; }
    HostKeyScreen Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("escape,n", "reject", "Reject", id="hostkey.reject"),
        Binding("y", "trust", "Trust", id="hostkey.trust"),
    ]

    def __init__(self, key: HostKey) -> None:
        super().__init__()
        self.key = key

    def compose(self) -> ComposeResult:
        k = self.key
        where = k.host if not k.port or k.port == 22 else f"{k.host} port {k.port}"
        with Vertical():
            yield Static(f"Unknown host key: {k.node}", id="hostkey-title", markup=False)
            yield Static(f"{where} presents a key that {k.known_hosts} does not list:", markup=False)
            yield Static(f"{k.algorithm}  {k.fingerprint}", id="hostkey-fp", markup=False)
            yield Static(
                f"Compare it with the node's own, on its console: ssh-keygen -lf {key_file_hint(k.algorithm)}"
                f"\nTrust it only if they match; it is then added to {k.known_hosts}.",
                markup=False,
            )
            with Horizontal():
                yield Button("Reject (n)", id="reject", compact=True)
                yield Button("Trust and add (y)", id="trust", variant="warning", compact=True)

    def on_mount(self) -> None:
        self.query_one("#reject", Button).focus()  # the safe choice has the focus

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "trust")

    def action_reject(self) -> None:
        self.dismiss(False)

    def action_trust(self) -> None:
        self.dismiss(True)
