"""The address each node is dialled at by its peers for transfers: its IP on the fabric subnet."""

from __future__ import annotations

import asyncio

from ..network import network
from ..nodes import probes
from ..nodes.facts import NodeFacts
from .errors import TransferError


async def node_facts(cluster, names: list[str], model_path: str) -> list[NodeFacts]:
    """Probe the named nodes at once (one script each); an unreachable node comes back unreachable."""

    async def one(name: str) -> NodeFacts:
        node = cluster[name]
        r = await node.run(probes.probe_script(model_path), timeout=90)
        if r.exit_status == 255:
            return NodeFacts(name=name, host=node.config.host, reachable=False, error=r.stderr.strip())
        return probes.parse_probe(name, node.config.host, r.stdout)

    return list(await asyncio.gather(*(one(n) for n in names)))


async def fabric_addresses(
    cluster, config, names: list[str], subnet: str | None = None
) -> tuple[dict[str, str], list[str]]:
    """node -> IP on the subnet joining `names` (the best one, or the one `subnet` names).

    Returns the addresses and notes for the user (e.g. a fall-back onto the management subnet).
    Raises TransferError when no subnet joins them all.
    """
    facts = await node_facts(cluster, names, config.model.path)
    down = [f for f in facts if not f.reachable]
    if down:
        raise TransferError("; ".join(f"{f.name} is unreachable: {f.error or 'no answer'}" for f in down))
    overrides = {n.name: n.interfaces for n in config.nodes if n.interfaces}
    dial = {n.name: n.host for n in config.nodes if n.name in names}
    found = network.subnets(facts, overrides, dial)
    if subnet:
        try:
            chosen = network.resolve(found, subnet, names)
        except ValueError as e:
            raise TransferError(str(e)) from None
    else:
        chosen = next((s for s in found if s.joins(names)), None)
    fast_down = [s for s in found if s.rdma and not s.up and s.joins(names)]
    if fast_down and chosen is not None and not (chosen.rdma and chosen.up) and not subnet:
        # do not quietly fall back to a slower (or dead-end) network when the fabric is unplugged
        f = fast_down[0]
        raise TransferError(
            f"the fabric {f.subnet} is down: "
            + "; ".join(f.notes or ["a link is down"])
            + ". Bring the link up, or name another subnet with --subnet CIDR"
        )
    if chosen is None:
        raise TransferError("no subnet joins " + ", ".join(names) + ": " + "; ".join(network.warnings(found, facts)))
    notes = []
    if chosen.management:
        notes.append(f"copying over {chosen.subnet}, the management subnet: no faster subnet joins " + ", ".join(names))
    return {n: chosen.nodes[n].ip for n in names}, notes
