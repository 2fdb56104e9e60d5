"""One node's card (a Static fed by present.nodes.node_card)."""

from __future__ import annotations

from textual.widgets import Static

from ...core.nodes.facts import NodeFacts, Subnet
from ...core.nodes.requirements import Need
from ..present.nodes import Link, node_card


class NodeCard(Static):
    DEFAULT_CSS = """
    NodeCard { border: round $panel-lighten-2; padding: 0 1; height: auto; }
    NodeCard.-down { border: round $error; }
    NodeCard:focus { border: round $accent; }
    """

    def __init__(self, name: str, host: str, role: str, **kw) -> None:
        super().__init__(**kw)
        self.node_name, self.host, self.role = name, host, role
        self.can_focus = True  # cards are reachable by keyboard and mouse (scroll into view)
        self.facts: NodeFacts | None = None
        self.link = Link()
        self.subnets: list[Subnet] = []
        self.fabric: str | None = None
        self.layout_words = ""  # the fabric's layout, every node's addresses read together (panes/nodes.py)
        self.paths_words = ""  # the launched plan's bootstrap interface and data path (panes/nodes.py)
        self.missing: list[Need] = []  # unmet tool needs (core/nodes/requirements.py), shown with their fix

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        down = self.link.connected is False or (self.facts is not None and not self.facts.reachable)
        self.set_class(down, "-down")
        self.update(
            node_card(
                self.node_name,
                self.host,
                self.role,
                self.facts,
                self.link,
                self.subnets,
                self.fabric,
                self.missing,
                self.layout_words,
                self.paths_words,
            )
        )
