"""The fabric's layout read from the nodes' addresses: direct, ring or switch; one subnet or one per half.

A ring has no switch: each node is cabled to its two neighbours, and each cable is a point-to-point
subnet that only those two share (NVIDIA's detect_and_configure_cluster_networking.py, mode "ring3",
addresses each ring link on a /24 of its own). NVIDIA Sync writes both halves of a CX-7 port on two
separate subnets, so one cable may carry two subnets. No subnet then joins every node: the rendezvous
goes over the management network, as NVIDIA's NCCL playbook bootstraps (NCCL_SOCKET_IFNAME=enP7s7), and
NCCL carries the data over every HCA of the ring. Pure functions over NodeFacts; no SSH here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import IPv4Network

from ..nodes.facts import NodeFacts
from .network import host_addresses


@dataclass
class End:
    """One node's end of a link: its interface, address and RDMA device there."""

    iface: str
    ip: str
    rdma: str | None


@dataclass
class Link:
    """One point-to-point subnet between two nodes (one half of a cable when the halves have their own)."""

    subnet: str
    ends: dict[str, End] = field(default_factory=dict)  # node -> its end

    def peer(self, node: str) -> str | None:
        return next((n for n in self.ends if n != node), None)

    def to_json(self) -> dict:
        return {
            "subnet": self.subnet,
            "nodes": {n: {"iface": e.iface, "ip": e.ip, "rdma": e.rdma} for n, e in self.ends.items()},
        }


@dataclass
class Ring:
    """Nodes cabled in a cycle, without a switch."""

    order: list[str]
    links: list[Link]

    def links_of(self, node: str) -> list[Link]:
        return [lk for lk in self.links if node in lk.ends]

    def far(self, node: str) -> list[Link]:
        """The links this node is not on: it reaches them only through a neighbour that forwards."""
        return [lk for lk in self.links if node not in lk.ends]

    def hcas(self, node: str) -> list[str]:
        """Every RDMA device of the node's ring links, in link order: all go into NCCL_IB_HCA."""
        return list(dict.fromkeys(lk.ends[node].rdma for lk in self.links_of(node) if lk.ends[node].rdma))

    def to_json(self) -> dict:
        return {"nodes": list(self.order), "links": [lk.to_json() for lk in self.links]}


def _fabric_ends(f: NodeFacts) -> dict[IPv4Network, End]:
    """The node's RDMA interfaces that are up, by the subnet each has an address on."""
    out: dict[IPv4Network, End] = {}
    for iface, ipi in host_addresses(f):
        if iface.rdma and iface.up:
            out.setdefault(ipi.network, End(iface.name, str(ipi.ip), iface.rdma))
    return out


def fabric_links(facts: dict[str, NodeFacts], order: list[str]) -> tuple[list[Link], list[str]]:
    """(links, subnets that join every node): the RDMA subnets two nodes share, and the ones all share."""
    seen: dict[IPv4Network, dict[str, End]] = {}
    for name in order:
        f = facts.get(name)
        if f is None or not f.reachable:
            continue
        for net, end in _fabric_ends(f).items():
            seen.setdefault(net, {})[name] = end
    links = [
        Link(str(net), ends)
        for net, ends in sorted(seen.items(), key=lambda kv: int(kv[0].network_address))
        if len(ends) == 2
    ]
    shared = [str(net) for net, ends in seen.items() if len(ends) == len(order)]
    return links, shared


def ring_of(facts: dict[str, NodeFacts], order: list[str]) -> Ring | None:
    """The ring the fabric's subnets describe, or None: three or more nodes, no RDMA subnet joins them all,
    and the point-to-point subnets make one cycle (each node has exactly two neighbours, all connected)."""
    if len(order) < 3:
        return None
    links, shared = fabric_links(facts, order)
    if shared or not links:
        return None
    neighbours: dict[str, set[str]] = {n: set() for n in order}
    for lk in links:
        a, b = list(lk.ends)
        neighbours[a].add(b)
        neighbours[b].add(a)
    if any(len(v) != 2 for v in neighbours.values()):
        return None
    walk, prev = [order[0]], None
    while len(walk) <= len(order):
        nxt = sorted(neighbours[walk[-1]] - ({prev} if prev else set()))[0]
        prev = walk[-1]
        if nxt == order[0]:
            break
        walk.append(nxt)
    if sorted(walk) != sorted(order):
        return None  # two smaller cycles, not one ring
    return Ring(walk, links)


def subnet_style(facts: dict[str, NodeFacts], order: list[str]) -> str:
    """ "per-half" when a port's two halves sit on two subnets (as NVIDIA Sync writes them), "one subnet"
    when one address per port carries it, "" when no half has a fabric address."""
    per_half = one = False
    for name in order:
        f = facts.get(name)
        if f is None:
            continue
        halves: dict[str, int] = {}
        for iface in f.interfaces:
            if iface.rdma and iface.up and iface.ipv4:
                key = re.sub(r"^en(?:P\d+)?", "", iface.name)  # enp1s0f1np1 / enP2p1s0f1np1: one port
                halves[key] = halves.get(key, 0) + 1
        per_half |= any(k >= 2 for k in halves.values())
        one |= any(k == 1 for k in halves.values())
    return "per-half" if per_half else "one subnet" if one else ""


def ring_used(facts: dict[str, NodeFacts], ring: Ring) -> dict[str, list]:
    """Per node, the interfaces NCCL carries a ring's data on: every end of its links."""
    out: dict[str, list] = {}
    for name in ring.order:
        f = facts.get(name)
        if f is None:
            continue
        names = [lk.ends[name].iface for lk in ring.links_of(name)]
        out[name] = [i for i in f.interfaces if i.name in names]
    return out


def boot_note(ring: Ring, subnet: str) -> str:
    links = ", ".join(f"{lk.subnet} ({' - '.join(lk.ends)})" for lk in ring.links)
    return (
        f"the fabric is a ring of {len(ring.order)} nodes ({' - '.join(ring.order)}; links {links}): no subnet "
        f"joins them all, so the rendezvous uses {subnet}, as NVIDIA's NCCL playbook bootstraps over the "
        f"management port, and NCCL moves the data over every HCA of the ring. NVIDIA's cluster setup "
        f"tests a ring with NCCL built from zyang-dev/nccl's dgxspark-3node-ring branch: if the image's NCCL "
        f"hangs or crawls on the ring, that build is the one NVIDIA validated"
    )


TOPOLOGY_WORDS = {"back-to-back": "direct", "ring": "ring", "switch": "switch"}  # as NVIDIA Sync names them


def layout(facts: dict[str, NodeFacts], order: list[str], topo: str) -> dict:
    """What the nodes' addresses say about the fabric: {"topology": direct | ring | switch, "subnets": ...}."""
    return {"topology": TOPOLOGY_WORDS.get(topo, topo), "subnets": subnet_style(facts, order)}


def describe_layout(lay: dict | None) -> str:
    """ "ring, per-half subnets"; "" when nothing is known."""
    if not lay or not lay.get("topology"):
        return ""
    subs = lay.get("subnets")
    return lay["topology"] + (f", {subs} subnets" if subs == "per-half" else f", {subs}" if subs else "")
