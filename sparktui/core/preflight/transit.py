"""Whether a ring's nodes forward for each other: IPv4 forwarding, routes to the far links, iptables' FORWARD.

On a ring a node reaches a link it is not cabled to only through a neighbour that forwards
(FujitsuPolycom/sparkring docs/PREREQUISITES.md, "Routing and forwarding across the fabric"; sparkring PR #95
made these launch prerequisites). Three things must hold on every node: a route to each far link's subnet
via the neighbour on it, `net.ipv4.ip_forward=1`, and a FORWARD chain that lets fabric traffic through.
Installing Docker sets the FORWARD policy to DROP (spark-arena/sparkrun#157, #174): links up, neighbours
ping, and every far address is silent, like a dead cable. The look gathers the three (SECTION), judge()
names each failure with the command that fixes it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

# Read as the SSH user; iptables needs root, so `sudo -n` (no prompt) is tried when the plain call fails.
SECTION = """echo @@fwd; cat {root}/proc/sys/net/ipv4/ip_forward 2>/dev/null; true
echo @@routes; ip -4 route show 2>/dev/null; true
echo @@iptables; (iptables -S FORWARD 2>/dev/null || sudo -n iptables -S FORWARD 2>/dev/null) \
&& (iptables -S DOCKER-USER 2>/dev/null || sudo -n iptables -S DOCKER-USER 2>/dev/null); true
"""
_ROUTE = re.compile(r"^(\S+)(?:\s+via\s+(\S+))?(?:.*?\bdev\s+(\S+))?")
_RULE = re.compile(r"^-A (FORWARD|DOCKER-USER)\s+(.*?)\s*-j ACCEPT\s*$")


@dataclass
class TransitLook:
    """What a node showed: forwarding, its IPv4 routes, its FORWARD policy and ACCEPT rules."""

    ip_forward: bool | None = None  # None: unreadable
    routes: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (dest, via, dev)
    policy: str | None = None  # "ACCEPT" | "DROP" | None: iptables unreadable (no root, no sudo -n)
    accepts: list[tuple[str | None, str | None]] = field(default_factory=list)  # (in, out) of plain ACCEPTs


def parse(sec: dict[str, list[str]]) -> TransitLook | None:
    """The look's three sections; None when the look had none (an older look, a test's own)."""
    if "fwd" not in sec:
        return None
    out = TransitLook()
    fwd = "".join(sec.get("fwd", [])).strip()
    out.ip_forward = {"1": True, "0": False}.get(fwd)
    for line in sec.get("routes", []):
        m = _ROUTE.match(line.strip())
        if m and line.strip():
            out.routes.append((m[1], m[2], m[3]))
    for line in sec.get("iptables", []):
        line = line.strip()
        if line.startswith("-P FORWARD "):
            out.policy = line.split()[2].upper()
        m = _RULE.match(line)
        if m:
            words = m[2].split()
            rest = [w for w in words if w not in ("-i", "-o")]
            ins = words[words.index("-i") + 1] if "-i" in words else None
            outs = words[words.index("-o") + 1] if "-o" in words else None
            if len(rest) == (ins is not None) + (outs is not None):  # nothing but -i/-o: unrestricted
                out.accepts.append((ins, outs))
    return out


def _routed(look: TransitLook, subnet: str, devs: set[str]) -> bool:
    """A route other than the default covers the subnet and leaves through a fabric interface."""
    net = ipaddress.IPv4Network(subnet)
    for dest, _via, dev in look.routes:
        if dest == "default":
            continue
        try:
            covers = net.subnet_of(ipaddress.IPv4Network(dest, strict=False))
        except ValueError:
            continue
        if covers and (dev is None or dev in devs):
            return True
    return False


def _lets_through(look: TransitLook, a: str, b: str) -> bool:
    return any(i in (None, a) and o in (None, b) for i, o in look.accepts)


@dataclass
class Problem:
    node: str
    what: str
    fix: list[str]

    def line(self) -> str:
        return f"{self.node}: {self.what}. Fix: `{' && '.join(self.fix)}`"

    def to_json(self) -> dict:
        return {"node": self.node, "problem": self.what, "fix": list(self.fix)}


def judge(node: str, look: TransitLook | None, ring: dict) -> tuple[list[Problem], list[str]]:
    """(problems, notes) of one node of the plan's ring (fabric.ring: its links and their ends)."""
    if look is None:
        return [], []
    links = ring.get("links") or []
    mine = [lk for lk in links if node in lk["nodes"]]
    far = [lk for lk in links if node not in lk["nodes"]]
    devs = {lk["nodes"][node]["iface"] for lk in mine}
    problems, notes = [], []
    if look.ip_forward is False:
        problems.append(
            Problem(
                node,
                "net.ipv4.ip_forward is 0: traffic for its neighbours' link is dropped here",
                [
                    "sudo sysctl -w net.ipv4.ip_forward=1",
                    "echo net.ipv4.ip_forward=1 | sudo tee /etc/sysctl.d/60-fabric-forward.conf",
                ],
            )
        )
    elif look.ip_forward is None:
        notes.append(f"{node}: net.ipv4.ip_forward unreadable: check `sysctl net.ipv4.ip_forward` is 1")
    for lk in far:
        if _routed(look, lk["subnet"], devs):
            continue
        # Via a neighbour that sits on that far link, over the link this node shares with it.
        hop = next(((m, peer) for m in mine for peer in lk["nodes"] if peer in m["nodes"] and peer != node), None)
        if hop is None:
            continue
        m, peer = hop
        problems.append(
            Problem(
                node,
                f"no route to {lk['subnet']} (the link {' - '.join(lk['nodes'])}): its "
                f"addresses are reached only through {peer}",
                [f"sudo ip route replace {lk['subnet']} via {m['nodes'][peer]['ip']} dev {m['nodes'][node]['iface']}"],
            )
        )
    if look.policy is None:
        notes.append(
            f"{node}: iptables' FORWARD chain unreadable (needs root): check `sudo iptables -S FORWARD`; "
            f"a DROP policy (Docker sets it) blocks the ring's transit"
        )
    elif look.policy != "ACCEPT":
        # Relay directions: between interfaces that face different neighbours.
        faces = {lk["nodes"][node]["iface"]: next(p for p in lk["nodes"] if p != node) for lk in mine}
        pairs = [(a, b) for a in faces for b in faces if faces[a] != faces[b] and not _lets_through(look, a, b)]
        if pairs:
            fix = [f"sudo iptables -I DOCKER-USER 1 -i {a} -o {b} -j ACCEPT" for a, b in pairs]
            problems.append(
                Problem(
                    node,
                    f"iptables' FORWARD policy is {look.policy} (installing Docker sets it) and "
                    f"no rule accepts the relays below between its ring interfaces: "
                    f"transit is silently dropped, like a dead cable",
                    fix,
                )
            )
    return problems, notes
