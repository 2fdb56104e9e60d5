"""Nodes pane: a card per configured node."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll

from ...core.config.config import Config
from ...core.state.events import ConnectionChanged, NodeUpdated
from ...core.nodes.facts import NodeFacts, Subnet
from ...core.nodes.requirements import tool_needs
from ...core.network.fabric import fabric_layout
from ...core.network.paths import describe_paths
from ...core.network.ring import describe_layout
from ..present.nodes import Link, fabric_subnet
from ..ids import widget_id
from ..routing import handles
from ..widgets.node_card import NodeCard


class NodesPane(VerticalScroll):
    def __init__(self, config: Config, **kw) -> None:
        super().__init__(**kw)
        self.config = config

    def compose(self) -> ComposeResult:
        for n in self.config.nodes:
            yield NodeCard(n.name, n.host, n.role, id=widget_id("node", n.name))

    def card(self, name: str) -> NodeCard:
        return self.query_one(f"#{widget_id('node', name)}", NodeCard)

    def set_facts(self, facts: NodeFacts) -> None:
        if any(n.name == facts.name for n in self.config.nodes):
            card = self.card(facts.name)
            card.facts = facts
            card.missing = [n for n in tool_needs(facts, self.config) if n.status == "fail"] if facts.reachable else []
            card.redraw()

    @handles(NodeUpdated)
    def _facts(self, e: NodeUpdated) -> None:
        self.set_facts(e.facts)

    @handles(ConnectionChanged)
    def _link(self, e: ConnectionChanged) -> None:
        self.set_link(e.node, Link(e.connected, e.error))

    def set_link(self, name: str, link: Link) -> None:
        if any(n.name == name for n in self.config.nodes):
            card = self.card(name)
            card.link = link
            card.redraw()

    def set_paths(self, paths: dict | None) -> None:
        """The launched plan's bootstrap interface and data HCAs, per node (core/network/paths.py)."""
        for card in self.query(NodeCard):
            card.paths_words = (
                describe_paths(paths, card.node_name)
                if paths and card.node_name in (paths.get("bootstrap", {}).get("nodes") or {})
                else ""
            )
            card.redraw()

    def set_subnets(self, subnets: list[Subnet], chosen: str | None = None) -> None:
        fabric = fabric_subnet(subnets, chosen)
        cards = list(self.query(NodeCard))
        facts = {c.node_name: c.facts for c in cards if c.facts is not None}
        layout = describe_layout(fabric_layout(facts, [n.name for n in self.config.nodes]))
        for card in cards:
            card.subnets, card.fabric, card.layout_words = subnets, fabric, layout
            card.redraw()
