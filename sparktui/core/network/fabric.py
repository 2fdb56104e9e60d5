"""The fabric at its rate: each node's ConnectX port and its halves, the MTU, the topology, and what
NCCL needs to use them all.

A DGX Spark's QSFP port enumerates as two PCIe Gen5 x4 halves, each its own RDMA device and netdev
(`rocep1s0f1` <-> `enp1s0f1np1`, `roceP2p1s0f1` <-> `enP2p1s0f1np1`; NVIDIA/dgx-spark-playbooks
nvidia/connect-two-sparks/README.md: "each physical port has two logical interface"). NCCL reaches the
link's rate only with both halves in NCCL_IB_HCA (NVIDIA/dgx-spark-playbooks#102 and PR #103: ~3 GB/s
busbw with one half, 23.74 GB/s with both and MTU 9000). Pure functions over NodeFacts; no SSH here.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from ipaddress import IPv4Interface, IPv4Network

from ..nodes.facts import Interface, NodeFacts, Subnet
from .ring import fabric_links, layout, ring_of

# enp1s0f1np1 / enP2p1s0f1np1: one port, the second half in PCI domain 2 (network.py's twins).
_PORT = re.compile(r"^en(?:P\d+)?(p\d+s\d+f\d+(?:np\d+)?)$")
JUMBO = 9000  # what NVIDIA's playbooks and the threads above set on the CX7 netdevs
# MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#104 (two Sparks, end to end prefill).
MTU_EFFECT = "prefill measured 1311 tok/s at MTU 1500 vs 1343 at 9000 on one half, 1410 at 9000 on both halves"
HALF_EFFECT = (
    "NCCL moves data over one half only: about half the link (NVIDIA/dgx-spark-playbooks#102: "
    "~3 GB/s busbw on one half, 23.74 GB/s with both halves and MTU 9000)"
)
PLAYBOOK = "NVIDIA's connect-two-sparks playbook"


@dataclass
class Port:
    """One physical port of a node and its halves (a single one on hosts that are not Sparks)."""

    key: str  # what the halves share: "p1s0f1" (from the names), or the interface name
    halves: list[Interface] = field(default_factory=list)

    def speed_mbps(self) -> int | None:
        """The port's speed: the fastest its halves report (each half of a CX7 reports the port's 200000)."""
        known = [i.speed_mbps for i in self.halves if i.speed_mbps]
        return max(known) if known else None

    def to_json(self) -> dict:
        return {
            "port": self.key,
            "speed_mbps": self.speed_mbps(),
            "halves": [
                {
                    "iface": i.name,
                    "rdma": i.rdma,
                    "up": i.up,
                    "state": i.state or ("up" if i.up else "down"),
                    "mtu": i.mtu,
                    "ipv4": list(i.ipv4),
                    "pci": i.pci,
                    "gid_index": i.gid_index,
                }
                for i in self.halves
            ],
        }


def _pci_tail(pci: str | None) -> str | None:
    """bus:device.function without the PCI domain: what a port's two halves share on a GB10."""
    return pci.split(":", 1)[1] if pci and pci.count(":") == 2 else None


def ports(f: NodeFacts) -> list[Port]:
    """The node's RDMA ports, each with its halves in `ip addr` order.

    Halves pair by name (enp1s0f1np1 with enP2p1s0f1np1) unless their PCI addresses, when both are
    known, say otherwise (another card in another domain that happens to share the bus number)."""
    out: list[Port] = []
    for iface in f.interfaces:
        if not iface.rdma:
            continue
        m = _PORT.match(iface.name)
        key = m[1] if m else iface.name
        port = next((p for p in out if p.key == key), None)
        if port is not None and all(
            _pci_tail(h.pci) in (None, _pci_tail(iface.pci)) or iface.pci is None for h in port.halves
        ):
            port.halves.append(iface)
        else:
            out.append(Port(key if port is None else iface.name, [iface]))
    return out


def port_of(f: NodeFacts, ifname: str) -> Port | None:
    return next((p for p in ports(f) if any(h.name == ifname for h in p.halves)), None)


def _joining(subnets: list[Subnet], order: list[str]) -> list[Subnet]:
    return [s for s in subnets if not s.management and s.rdma and s.up and s.joins(order)]


def usable(f: NodeFacts, iface: Interface, subnets: list[Subnet], order: list[str]) -> bool:
    """Whether NCCL can use this half: up, with an address on a subnet that joins every node."""
    if not iface.up or not iface.rdma:
        return False
    return any(
        s.nodes.get(f.name) is not None and s.nodes[f.name].iface == iface.name for s in _joining(subnets, order)
    )


def _twin_address(addr: str, taken: list[IPv4Network]) -> str | None:
    """An address for an idle half: the rendezvous address moved to the next free subnet of the same size
    (192.168.100.10/24 -> 192.168.101.10/24, as NVIDIA's playbook addresses the twin)."""
    try:
        here = IPv4Interface(addr)
    except ValueError:
        return None
    net, host = here.network, int(here.ip) - int(here.network.network_address)
    for step in range(1, 9):
        try:
            nxt = IPv4Network((int(net.network_address) + step * net.num_addresses, net.prefixlen))
        except (ValueError, ipaddress.AddressValueError):
            return None
        if not any(nxt.overlaps(t) for t in taken):
            return f"{ipaddress.IPv4Address(int(nxt.network_address) + host)}/{net.prefixlen}"
    return None


@dataclass
class IdleHalf:
    """A half of the rendezvous port that NCCL cannot use, and the commands that would bring it in."""

    node: str
    iface: str
    rdma: str
    why: str  # "link down" | "no address" | "no carrier" | "its subnet does not join every node"
    fix: list[str]


def idle_halves(facts: dict[str, NodeFacts], subnet: Subnet, subnets: list[Subnet], order: list[str]) -> list[IdleHalf]:
    """Per node, the halves of the port carrying the rendezvous that NCCL would leave idle."""
    out = []
    for name in order:
        f, addr = facts.get(name), subnet.nodes.get(name)
        if f is None or addr is None or not addr.rdma:
            continue
        port = port_of(f, addr.iface)
        if port is None:
            continue
        mine = next((h for h in port.halves if h.name == addr.iface), None)
        cidr = next((c for c in (mine.ipv4 if mine else []) if c.split("/")[0] == addr.ip), None)
        taken = [IPv4Interface(c).network for i in f.interfaces for c in i.ipv4 if _is_cidr(c)]
        for h in port.halves:
            if h.name == addr.iface or usable(f, h, subnets, order):
                continue
            fix = []
            if not h.ipv4:
                want = _twin_address(cidr, taken) if cidr else None
                fix.append(f"sudo ip addr add {want or 'ADDRESS/PREFIX'} dev {h.name}")
                if want:
                    taken.append(IPv4Interface(want).network)
            if "no carrier" in h.state:
                fix.append(f"check the cable of {h.name}")
            elif not h.up:
                fix.append(f"sudo ip link set {h.name} up")
            why = ("no address" if not h.ipv4 else "") or h.state or "its subnet does not join every node"
            if not h.ipv4 and h.state:
                why = f"{h.state}, no address"
            out.append(
                IdleHalf(
                    name,
                    h.name,
                    h.rdma or "",
                    why,
                    fix or [f"give {h.name} an address on a subnet of its own that every node shares"],
                )
            )
    return out


def _is_cidr(c: str) -> bool:
    try:
        IPv4Interface(c)
        return True
    except ValueError:
        return False


def idle_warning(idle: list[IdleHalf], subnet: Subnet) -> str:
    """One warning for every idle half: what it costs and, per node, the playbook's commands."""
    where = ", ".join(f"{h.node} {h.iface} ({h.rdma}): {h.why}" for h in idle)
    fixes = "; ".join(f"on {h.node}: `{' && '.join(h.fix)}`" for h in idle)
    return (
        f"the fabric port's other half is idle ({where}): {HALF_EFFECT}. Fix ({PLAYBOOK}, each half on a subnet "
        f"of its own): {fixes}; then every usable half goes into NCCL_IB_HCA"
    )


# --- MTU ------------------------------------------------------------------------------------------


def in_use(
    facts: dict[str, NodeFacts], subnet: Subnet, subnets: list[Subnet], order: list[str]
) -> dict[str, list[Interface]]:
    """Per node, the fabric interfaces NCCL would carry data on: the rendezvous one and every usable half
    of its port."""
    out: dict[str, list[Interface]] = {}
    for name in order:
        f, addr = facts.get(name), subnet.nodes.get(name)
        if f is None or addr is None:
            continue
        mine = [i for i in f.interfaces if i.name == addr.iface]
        port = port_of(f, addr.iface) if addr.rdma else None
        if port is not None:
            mine += [h for h in port.halves if h.name != addr.iface and usable(f, h, subnets, order)]
        out[name] = mine
    return out


def mtu_checks(
    facts: dict[str, NodeFacts],
    subnet: Subnet,
    subnets: list[Subnet],
    order: list[str],
    used: dict[str, list[Interface]] | None = None,
) -> tuple[list[str], list[str]]:
    """(errors, warnings) about the MTU of the fabric interfaces in use.

    MTUs that differ between nodes on one subnet drop every frame larger than the smallest: an error
    naming both. Below 9000 on a RoCE link: a warning with the measured effect and the fix. used: the
    interfaces in use when they are not the rendezvous port's (a ring's links)."""
    errors, warns = [], []
    used = used if used is not None else in_use(facts, subnet, subnets, order)
    by_net: dict[IPv4Network, list[tuple[str, Interface]]] = {}
    for name, ifaces in used.items():
        for i in ifaces:
            for c in i.ipv4:
                if _is_cidr(c):
                    by_net.setdefault(IPv4Interface(c).network, []).append((name, i))
    for net, members in by_net.items():
        known = [(n, i) for n, i in members if i.mtu]
        if len({i.mtu for _, i in known}) > 1:
            top = max(i.mtu for _, i in known)
            shown = ", ".join(f"{n} {i.name} MTU {i.mtu}" for n, i in known)
            fix = "; ".join(f"`sudo ip link set {i.name} mtu {top}` on {n}" for n, i in known if i.mtu != top)
            errors.append(
                f"MTUs differ on {net} ({shown}): frames larger than the smallest are dropped, so NCCL "
                f"stalls or crawls. Set one MTU on every node: {fix}"
            )
    low = [
        (n, i)
        for n, ifaces in used.items()
        for i in ifaces
        if i.rdma and i.mtu and i.mtu < JUMBO and i.link_type != "infiniband"
    ]  # IB's MTU is its own (4092)
    if low and not errors:
        shown = ", ".join(f"{n} {i.name} {i.mtu}" for n, i in low)
        fix = "; ".join(f"`sudo ip link set {i.name} mtu {JUMBO}` on {n}" for n, i in low)
        warns.append(
            f"MTU below {JUMBO} on the RoCE fabric ({shown}): {MTU_EFFECT} "
            f"(MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#104). Fix: {fix} (and `mtu: {JUMBO}` in "
            f"the netplan file to keep it)"
        )
    return errors, warns


# --- topology -------------------------------------------------------------------------------------


def _up_ports(f: NodeFacts) -> int:
    return sum(1 for p in ports(f) if any(h.up for h in p.halves))


def topology(facts: dict[str, NodeFacts], order: list[str]) -> str:
    """ "back-to-back" (two nodes), "ring" or "switch".

    A ring is read from the addresses first (ring.ring_of: point-to-point subnets in one cycle, none joining
    every node). Without them, NVIDIA's multi-sparks-through-switch playbook
    (assets/spark_cluster_setup/spark_cluster_setup.py, pre_validate_cluster) calls three nodes with four CX7
    interfaces up a ring; that only holds while no RDMA subnet joins them all, which takes a switch."""
    if len(order) <= 2:
        return "back-to-back"
    if ring_of(facts, order) is not None:
        return "ring"
    nodes = [facts[n] for n in order if n in facts]
    _, shared = fabric_links(facts, order)
    if len(order) == 3 and nodes and not shared and all(_up_ports(f) >= 2 for f in nodes):
        return "ring"
    return "switch"


def topology_env(topo: str) -> dict[str, str]:
    """The NCCL settings NVIDIA's playbook runs each topology with (spark_cluster_setup.py run_nccl_test:
    NCCL_IB_SUBNET_AWARE_ROUTING=1 for 3+ nodes, plus NCCL_IB_MERGE_NICS=0 and NCCL_NET_PLUGIN=none on a
    ring); two nodes back to back need nothing beyond NCCL_IB_HCA."""
    if topo == "ring":
        return {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_IB_MERGE_NICS": "0", "NCCL_NET_PLUGIN": "none"}
    if topo == "switch":
        return {"NCCL_IB_SUBNET_AWARE_ROUTING": "1"}
    return {}


def gid_index(ifaces: list[Interface]) -> int | None:
    """NCCL_IB_GID_INDEX for a node: the RoCEv2 IPv4 GID index its halves in use share (3 on a Spark,
    tonyd2wild/DeepSeek-v4-Flash-Vision-Exp-DSpark-1M-NVFP4-KV-2x-DGX-Spark#35); None when unknown or
    when they differ (one variable covers every HCA, so NCCL's own choice is safer then)."""
    found = {i.gid_index for i in ifaces if i.rdma}
    return found.pop() if len(found) == 1 and None not in found else None


def line_rate_mbps(facts: dict[str, NodeFacts], used: dict[str, list[Interface]]) -> int | None:
    """What the fabric could carry between the nodes: per node, each half in use contributes its share
    of the port's speed (a CX7 half is a PCIe Gen5 x4 link, about half the 200 Gb/s port); the slowest
    node sets the rate. None when a speed is unknown."""
    rates = []
    for name, ifaces in used.items():
        f = facts.get(name)
        if f is None:
            return None
        total = 0
        for i in ifaces:
            port = port_of(f, i.name) if i.rdma else None
            speed = (port.speed_mbps() if port else None) or i.speed_mbps
            if not speed:
                return None
            total += speed // (len(port.halves) if port else 1)
        rates.append(total)
    return min(rates) if rates else None


def summary(
    facts: dict[str, NodeFacts], subnet: Subnet, used: dict[str, list[Interface]], topo: str, idle: bool
) -> dict:
    """What a plan tells the preflight about its fabric: the line rate, and per node the halves in use,
    the port's halves and the smallest MTU in use (for naming why a measured rate falls short)."""
    halves, of, mtu = {}, {}, {}
    for name, ifaces in used.items():
        f = facts.get(name)
        rdma = [i for i in ifaces if i.rdma]
        halves[name] = len(rdma)
        port = port_of(f, rdma[0].name) if f is not None and rdma else None
        of[name] = len(port.halves) if port else len(rdma)
        known = [i.mtu for i in ifaces if i.mtu]
        mtu[name] = min(known) if known else None
    return {
        "topology": topo,
        "rdma": subnet.rdma,
        "line_rate_mbps": line_rate_mbps(facts, used),
        "halves_in_use": halves,
        "port_halves": of,
        "mtu": mtu,
        "idle_half": idle,
    }


def rails(facts: dict[str, NodeFacts], used: dict[str, list[Interface]], order: list[str]) -> list[dict]:
    """Each RDMA half in use as a rail to test on its own: per subnet, the first node of `order` on it paired
    with every other node there, with each end's device and the half's share of the port's speed."""
    by_net: dict[str, list[tuple[str, Interface, str]]] = {}
    for name in order:
        for i in used.get(name, []):
            if not i.rdma or not i.up:
                continue
            for c in i.ipv4:
                if _is_cidr(c):
                    by_net.setdefault(str(IPv4Interface(c).network), []).append((name, i, c.split("/")[0]))
    out = []
    for net, ends in sorted(by_net.items(), key=lambda kv: int(IPv4Network(kv[0]).network_address)):
        first, rest = ends[0], [e for e in ends[1:] if e[0] != ends[0][0]]
        for other in rest:
            speeds = []
            for name, i, _ in (first, other):
                port = port_of(facts[name], i.name) if name in facts else None
                speed = (port.speed_mbps() if port else None) or i.speed_mbps
                speeds.append(speed // len(port.halves) if speed and port else speed)
            known = [s for s in speeds if s]
            out.append(
                {
                    "subnet": net,
                    "speed_mbps": min(known) if known else None,
                    "ends": [
                        {"node": n, "iface": i.name, "ip": ip, "rdma": i.rdma, "gid_index": i.gid_index}
                        for n, i, ip in (first, other)
                    ],
                }
            )
    return out


def fabric_layout(facts: dict[str, NodeFacts], order: list[str]) -> dict:
    """What the addresses say about the fabric (ring.layout): direct, ring or switch; one subnet or per-half."""
    live = [n for n in order if n in facts and facts[n].reachable]
    return layout(facts, live, topology(facts, live)) if len(live) >= 2 else {}
