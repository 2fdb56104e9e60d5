"""Probe every node at once and analyse the network: the facts `check`, `status` and plans share."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable

from . import facts_store, probes
from ..network import network
from ..network.fabric import fabric_layout
from ..config.config import Config
from .facts import NodeFacts, Subnet
from ..remote.channels import SESSIONS_NEEDED
from ..remote.ssh import Cluster, Node


async def probe_node(node: Node, model_path: str) -> NodeFacts:
    """One round-trip: the probe script; an unreachable node gives facts with reachable=False."""
    if not node.connected:
        try:
            await node.connect()
        except Exception:  # noqa: BLE001 - the reason is in node.error
            return NodeFacts(name=node.name, host=node.config.host, reachable=False, error=node.error)
    r = await node.run(probes.probe_command(model_path), timeout=probes.PROBE_TIMEOUT)
    if r.exit_status == 255 and not r.stdout:
        return NodeFacts(name=node.name, host=node.config.host, reachable=False, error=r.stderr.strip() or node.error)
    facts = probes.parse_probe(node.name, node.config.host, r.stdout)
    facts.reachable = True
    if r.exit_status == 124:
        facts.notes.append(f"the probe timed out after {probes.PROBE_TIMEOUT:g} s; facts are partial")
    short = await node.sessions_short(SESSIONS_NEEDED, timeout=10)
    if short and node.connected:
        facts.notes.append(
            f"a launch cannot run here: it needs {SESSIONS_NEEDED} SSH sessions at once (one "
            f"follows the engine's log while commands run): {short}"
        )
    return facts


async def probe_all(
    cluster: Cluster, config: Config, on_facts: Callable[[Node, NodeFacts], None] | None = None
) -> dict[str, NodeFacts]:
    """Facts for every node of the config, probed concurrently, in config order; `on_facts` hears of
    each node as soon as it has answered (a screen fills that node's card without waiting for the rest)."""

    async def one(node: Node) -> NodeFacts:
        facts = await probe_node(node, config.model.path)
        if on_facts is not None:
            on_facts(node, facts)
        return facts

    results = await asyncio.gather(*(one(n) for n in cluster))
    return {f.name: f for f in results}


@dataclass
class Inventory:
    facts: dict[str, NodeFacts]
    subnets: list[Subnet] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    layout: dict = field(default_factory=dict)  # direct | ring | switch; one subnet or per-half (fabric_layout)

    @property
    def all_reachable(self) -> bool:
        return all(f.reachable for f in self.facts.values())

    def to_json(self) -> dict:
        return {
            "nodes": [f.to_json() for f in self.facts.values()],
            "fabric": [s.to_json() for s in self.subnets],
            "layout": dict(self.layout),
            "warnings": self.warnings,
        }


def overrides(config: Config) -> dict[str, dict[str, str]]:
    return {n.name: dict(n.interfaces) for n in config.nodes if n.interfaces}


def analyse(config: Config, facts: dict[str, NodeFacts]) -> Inventory:
    reachable = [f for f in facts.values() if f.reachable]
    dial = {n.name: n.host for n in config.nodes}
    subs = network.subnets(reachable, overrides(config), dial) if reachable else []
    lay = fabric_layout(facts, [n.name for n in config.nodes])
    warns = network.warnings(subs, list(facts.values()), ring=lay.get("topology") == "ring")
    return Inventory(facts=facts, subnets=subs, warnings=warns, layout=lay)


async def take_inventory(
    cluster: Cluster, config: Config, on_facts: Callable[[Node, NodeFacts], None] | None = None
) -> Inventory:
    inv = analyse(config, await probe_all(cluster, config, on_facts))
    # kept for `plan --offline`; a cache that cannot be written is said, never a failed probe
    why = facts_store.remember(config.cluster, {n.name: n.host for n in config.nodes}, inv.facts)
    if why:
        inv.warnings.append(why)
    return inv
