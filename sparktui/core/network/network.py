"""Which IPv4 subnet joins all nodes, and how each node sits on it (interface, address, RoCE device).

The rendezvous address and every *_SOCKET_IFNAME come from here. Interface names differ between
nodes, so a subnet is the unit of choice and each node's interface is resolved on it.
"""

from __future__ import annotations

import ipaddress
import re
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Iterator

from ..nodes.facts import Interface, NodeAddr, NodeFacts, Subnet

# Host-local bridges carry the same address on every node (docker0 is 172.17.0.1/16 everywhere):
# they look like a shared subnet and are not one.
_LOCAL_BRIDGE = re.compile(r"^(docker\d+|br-[0-9a-f]{12}|virbr\d+|cni\d+|podman\d+|lxc?br\d+|lxdbr\d+)$")
# ConnectX ports show as two netdevs that differ only by the PCI domain: enp1s0f1np1 / enP2p1s0f1np1.
_PORT = re.compile(r"^en(?:P\d+)?(p\d+s\d+f\d+(?:np\d+)?)$")
TCP_VS_ROCE = "decode measured ~12.7 tok/s over TCP vs ~20 tok/s over RoCE for a 122B MoE on two Sparks"

Seen = dict[IPv4Network, list[tuple[Interface, IPv4Address]]]


def host_addresses(f: NodeFacts) -> Iterator[tuple[Interface, IPv4Interface]]:
    """Each interface's IPv4 addresses with their prefix, in the order `ip addr` listed them; host-local
    bridges, and what does not parse as IPv4, left out."""
    for iface in f.interfaces:
        if _LOCAL_BRIDGE.match(iface.name):
            continue
        for cidr in iface.ipv4:
            try:
                ipi = ipaddress.ip_interface(cidr)
            except ValueError:
                continue
            if isinstance(ipi, IPv4Interface):
                yield iface, ipi


def _addresses(f: NodeFacts) -> Seen:
    """Network -> (interface, address) in the order `ip addr` listed them."""
    seen: Seen = {}
    for iface, ipi in host_addresses(f):
        seen.setdefault(ipi.network, []).append((iface, ipi.ip))
    return seen


def _twins(a: str, b: str) -> bool:
    ma, mb = _PORT.match(a), _PORT.match(b)
    return bool(ma and mb and ma[1] == mb[1])


def _overrides(raw: dict[str, dict[str, str]] | None) -> dict[str, dict[IPv4Network, str]]:
    out: dict[str, dict[IPv4Network, str]] = {}
    for node, by_net in (raw or {}).items():
        for cidr, ifname in by_net.items():
            try:
                out.setdefault(node, {})[ipaddress.IPv4Network(cidr, strict=False)] = ifname
            except ValueError:
                continue  # config.py reports bad CIDRs with their line; nothing to force here
    return out


def _pick(
    node: str, net: IPv4Network, cands: list[tuple[Interface, IPv4Address]], forced: str | None, notes: list[str]
) -> tuple[Interface, IPv4Address]:
    """The node's interface on net: the override, else the first one up, else the first."""
    chosen = next((c for c in cands if c[0].up), cands[0])
    if forced is not None:
        match = next((c for c in cands if c[0].name == forced), None)
        if match is None:
            notes.append(
                f"{node}: override names {forced} for {net}, which has no address there; using {chosen[0].name}"
            )
        else:
            chosen = match
    names = list(dict.fromkeys(c[0].name for c in cands))
    for other in names:
        if other == chosen[0].name:
            continue
        if _twins(chosen[0].name, other):
            notes.append(
                f"{node}: {chosen[0].name} and {other} are twins of one port on {net}; "
                f"give the twin its own subnet (using {chosen[0].name})"
            )
        else:
            notes.append(f"{node}: {chosen[0].name} and {other} both have an address on {net} (using {chosen[0].name})")
    return chosen


def _dial_ips(live: list[NodeFacts], dial_hosts: dict[str, str] | None) -> list[IPv4Address]:
    hosts = dial_hosts if dial_hosts is not None else {f.name: f.host for f in live}
    out = []
    for host in hosts.values():
        try:
            out.append(IPv4Address(host))
        except ValueError:
            continue  # a hostname or ssh alias: which subnet it lands on is unknown here
    return out


def _rank(s: Subnet) -> tuple:
    net = IPv4Network(s.subnet)
    speed = s.speed_mbps
    return (
        not (s.rdma and s.up),
        not s.up,
        speed is None,
        -(speed or 0),
        s.management,
        int(net.network_address),
        net.prefixlen,
    )


def subnets(
    facts: list[NodeFacts], overrides: dict[str, dict[str, str]] | None = None, dial_hosts: dict[str, str] | None = None
) -> list[Subnet]:
    """The IPv4 subnets that join every reachable node, best first.

    Ranked: RDMA on every node and up, then faster known speed, then not the management subnet.
    overrides: node -> {subnet CIDR: interface} forces a node's interface on that subnet.
    dial_hosts: node -> the host sparktui dials (default: each NodeFacts.host); a subnet holding
    one of them, when it is an IP, is the management subnet.
    """
    live = [f for f in facts if f.reachable]
    if not live:
        return []
    seen = {f.name: _addresses(f) for f in live}
    common = set.intersection(*(set(s) for s in seen.values()))
    forced = _overrides(overrides)
    dial = _dial_ips(live, dial_hosts)
    out = []
    for net in common:
        sub = Subnet(subnet=str(net))
        speeds = []
        for f in live:
            iface, ip = _pick(f.name, net, seen[f.name][net], forced.get(f.name, {}).get(net), sub.notes)
            sub.nodes[f.name] = NodeAddr(iface=iface.name, ip=str(ip), rdma=iface.rdma)
            if not iface.up:
                sub.up = False
                sub.notes.append(f"{f.name}: {iface.name} on {net} is down")
            if iface.speed_mbps:
                speeds.append(iface.speed_mbps)
        ips = [a.ip for a in sub.nodes.values()]
        if len(set(ips)) < len(ips):
            continue  # one address on several nodes: a host-local network, not a shared one
        sub.rdma = all(a.rdma for a in sub.nodes.values())
        sub.speed_mbps = min(speeds) if speeds else None
        sub.management = any(ip in net for ip in dial)
        out.append(sub)
    return sorted(out, key=_rank)


def best_subnet(
    facts: list[NodeFacts], overrides: dict[str, dict[str, str]] | None = None, dial_hosts: dict[str, str] | None = None
) -> Subnet | None:
    """The subnet to rendezvous on, or None when no subnet joins all reachable nodes."""
    found = subnets(facts, overrides, dial_hosts)
    return found[0] if found else None


def describe(s: Subnet) -> str:
    """One line per choice, as listed in messages: `192.168.100.0/24 (spark1 enp1s0f1np1 .10, ...)`."""
    where = ", ".join(f"{n} {a.iface} {a.ip}" for n, a in s.nodes.items())
    tags = [t for t, on in (("RDMA", s.rdma), ("management", s.management), ("down", not s.up)) if on]
    return f"{s.subnet} ({where})" + (f" [{', '.join(tags)}]" if tags else "")


def resolve(subnets: list[Subnet], spec: str, node_names: list[str]) -> Subnet:
    """The subnet a user named: a CIDR, an IP inside one, or an interface name on the head.

    node_names are the nodes it must join, the head first. Raises ValueError listing the choices.
    """
    spec = spec.strip()
    usable = [s for s in subnets if s.joins(node_names)]

    def fail(why: str) -> ValueError:
        choices = "; ".join(describe(s) for s in usable) or "none: no subnet joins all nodes"
        return ValueError(f"{why}. Choices: {choices}")

    if not spec:
        raise fail("no subnet given")
    if "/" in spec:
        try:
            net = IPv4Network(spec, strict=False)
        except ValueError:
            raise fail(f"{spec!r} is not an IPv4 subnet") from None
        found = next((s for s in usable if IPv4Network(s.subnet) == net), None)
        if found is None:
            raise fail(f"no subnet {net} joins {', '.join(node_names)}")
        return found
    try:
        ip = IPv4Address(spec)
    except ValueError:
        ip = None
    if ip is not None:
        found = next((s for s in usable if ip in IPv4Network(s.subnet)), None)
        if found is None:
            raise fail(f"{spec} is on no subnet that joins {', '.join(node_names)}")
        return found
    head = node_names[0] if node_names else None
    on_head = [s for s in usable if head in s.nodes and s.nodes[head].iface == spec]
    if on_head:
        return on_head[0]
    # Names differ between nodes: accept another node's name when it points at one subnet only.
    elsewhere = [s for s in usable if any(a.iface == spec for a in s.nodes.values())]
    if len(elsewhere) == 1:
        return elsewhere[0]
    raise fail(f"no subnet that joins all nodes is on interface {spec!r} of {head}")


def _near_misses(facts: list[NodeFacts]) -> list[str]:
    """Subnets that reach some live nodes but not all: usually a fabric a node is missing."""
    live = [f for f in facts if f.reachable]
    seen = {f.name: _addresses(f) for f in live}
    reach: dict[IPv4Network, list[str]] = {}
    for name, nets in seen.items():
        for net in nets:
            reach.setdefault(net, []).append(name)
    out = []
    for net, names in sorted(reach.items(), key=lambda kv: (-len(kv[1]), int(kv[0].network_address))):
        if 1 < len(names) < len(live):
            missing = [f.name for f in live if f.name not in names]
            out.append(f"{net} reaches {', '.join(names)} but not {', '.join(missing)} (no address on it)")
    return out[:4]


def warnings(subnets: list[Subnet], facts: list[NodeFacts] | None = None, ring: bool = False) -> list[str]:
    """Plain-language problems with the network; facts (optional) explains what is missing. On a ring
    (ring.ring_of) each link reaches two nodes by design and the management subnet is where they meet."""
    out: list[str] = []
    if facts is not None:
        out += [f"{f.name} is unreachable and left out: {f.error or 'no answer'}" for f in facts if not f.reachable]
        out += [] if ring else _near_misses(facts)
    if not subnets:
        out.append("no subnet joins all nodes: give every node an address on one shared subnet (the fabric)")
        return out
    best = subnets[0]
    if ring:
        pass  # the rendezvous meets on the management subnet; the data goes over the ring's links
    elif all(s.management for s in subnets):
        out.append(
            f"only the management subnet {best.subnet} joins all nodes: NCCL would run over TCP on it "
            f"({TCP_VS_ROCE}); address the fabric link on every node"
        )
    elif not best.rdma:
        plain = [n for n, a in best.nodes.items() if not a.rdma]
        out.append(
            f"{best.subnet} has no RDMA device on {', '.join(plain)}: NCCL falls back to TCP sockets "
            f"(slower, still works)"
        )
    # Only the best subnet's notes: the others are shown with the subnets themselves.
    out += best.notes
    return out


# ---- the fabric: which network the nodes are meant to meet on, and why it cannot be used --------


def _net(cidr: str) -> IPv4Network | None:
    try:
        return IPv4Network(cidr, strict=False)
    except ValueError:
        return None


def fabric_nets(
    facts: list[NodeFacts], overrides: dict[str, dict[str, str]] | None = None, last_subnet: str | None = None
) -> dict[IPv4Network, str]:
    """The networks meant as the fabric, each with why: an RDMA device's subnet on some node, a subnet
    named in nodes[].interfaces, the subnet the deployment's last launch used."""
    out: dict[IPv4Network, str] = {}
    for f in facts:
        if not f.reachable:
            continue
        for iface, ipi in host_addresses(f):
            if iface.rdma:
                out.setdefault(ipi.network, f"RDMA device {iface.rdma} on {f.name} {iface.name}")
    for node, by_net in (overrides or {}).items():
        for cidr, ifname in by_net.items():
            net = _net(cidr)
            if net is not None:
                out.setdefault(net, f"nodes[{node}].interfaces names {ifname}")
    if last_subnet:
        net = _net(last_subnet)
        if net is not None:
            out.setdefault(net, "the deployment's last launch used it")
    return out


def fabric_problems(
    facts: dict[str, NodeFacts], net: IPv4Network, order: list[str], overrides: dict[str, dict[str, str]] | None = None
) -> list[tuple[str, str, str]]:
    """(node, interface, state) for every node of `order` that cannot use `net`: the interface is
    set down, has no carrier, or no interface has an address on it ("no address")."""
    forced = _overrides(overrides)
    out = []
    for name in order:
        f = facts.get(name)
        if f is None or not f.reachable:
            continue  # said elsewhere: the node is unreachable
        seen = _addresses(f).get(net, [])
        want = forced.get(name, {}).get(net)
        if seen:
            if any(i.up for i, _ in seen) and (want is None or any(i.name == want and i.up for i, _ in seen)):
                continue
            iface = next((i for i, _ in seen if i.name == want), seen[0][0])
            out.append((name, iface.name, iface.state or "down"))
            continue
        named = want or next((i.name for i in f.interfaces if i.rdma and not i.ipv4), None)
        iface = next((i for i in f.interfaces if i.name == named), None)
        state = "no address" + (f", {iface.state}" if iface is not None and iface.state else "")
        if named and iface is None:
            state = "missing (no such interface)"
        out.append((name, named or "no interface", state))
    return out


def fabric_fix(problems: list[tuple[str, str, str]], net: IPv4Network) -> str:
    """What to do about fabric_problems, one clause per kind of state."""
    fixes = []
    for node, iface, state in problems:
        if "no carrier" in state:
            fixes.append(f"check {iface}'s cable and switch port on {node}")
        elif "link down" in state:
            fixes.append(f"`ip link set {iface} up` on {node}")
        elif state.startswith("no address"):
            fixes.append(f"give {iface} on {node} its address on {net}")
        else:
            fixes.append(f"fix nodes[{node}].interfaces for {net}")
    return "; ".join(dict.fromkeys(fixes))
