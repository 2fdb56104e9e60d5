"""A node's facts as a card: reachability, GPU, memory bar, disk, containers, interfaces.

Styles name theme variables ($success, $error, ...) so every theme colours the cards its own way.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content

from ...core.network.fabric import JUMBO, ports
from ...core.nodes.facts import Interface, NodeFacts, Subnet
from ...core.nodes.requirements import Need
from . import fmt

# Host-local bridges hold the same address on every node and say nothing about the node's links.
BRIDGES = ("docker", "br-", "virbr", "cni", "podman", "lxcbr", "lxdbr")
BAR = 16  # memory bar width in cells: fits an 80-column card with the numbers beside it


@dataclass(frozen=True)
class Link:
    """How the UI knows a node's link: None = not tried yet."""

    connected: bool | None = None
    error: str | None = None


def status(facts: NodeFacts | None, link: Link) -> tuple[str, str, str]:
    """(symbol, style, words) for the card's first line."""
    if link.connected is False:
        return "✗", "$error bold", link.error or "unreachable"
    if facts is not None and not facts.reachable:
        return "✗", "$error bold", facts.error or "unreachable"
    if facts is None:
        if link.connected:
            return "◌", "$warning", "connected, probing…"
        return "◌", "$text-muted", "connecting…"
    return "●", "$success bold", "up"


def memory_used(facts: NodeFacts) -> tuple[int | None, int | None]:
    """(used, total) bytes of the memory the GPU works from: unified RAM on GB10, else host RAM."""
    total, avail = facts.memory.total_bytes, facts.memory.available_bytes
    if total is None:
        return None, None
    return (total - avail if avail is not None else None), total


def gpu_words(facts: NodeFacts) -> str:
    g = facts.gpu
    if g.count < 1:
        return "no GPU found"
    words = f"{g.count}× {g.name or 'GPU'}"
    if g.memory_total_bytes:
        words += f" {fmt.size(g.memory_total_bytes)}"
    elif g.unified:
        words += " (unified memory)"
    if g.utilization is not None:
        words += f"  util {g.utilization:.0f}%"
    return words


def memory_line(facts: NodeFacts, width: int = BAR) -> Content:
    used, total = memory_used(facts)
    frac = used / total if used is not None and total else None
    style = "$success" if frac is None or frac < 0.75 else "$warning" if frac < 0.9 else "$error"
    numbers = f" {fmt.size(used)}/{fmt.size(total)}" if total else " unknown"
    return Content.assemble(("MEM ", "bold"), (fmt.bar(frac, width), style), numbers)


def container_words(facts: NodeFacts) -> list[tuple[str, str]]:
    """(text, style) per container sparktui started on the node."""
    out = []
    for c in facts.containers:
        style = "$success" if c.state == "running" else "$error" if c.state in ("exited", "dead") else "$warning"
        out.append((f"{c.name} {c.state} ({c.status})", style))
    return out


def iface_role(node: str, iface: Interface, subnets: list[Subnet], fabric: str | None) -> tuple[str, str]:
    """('fabric'|'mgmt'|'', style): which subnet this interface carries for the node."""
    for s in subnets:
        addr = s.nodes.get(node)
        if addr is None or addr.iface != iface.name:
            continue
        if s.subnet == fabric:
            return "◆ fabric", "$accent bold"
        if s.management:
            return "⚠ mgmt", "$warning"
    return "", ""


def fabric_subnet(subnets: list[Subnet], chosen: str | None = None) -> str | None:
    """The subnet the cards mark as the fabric: the plan's, else the best one that is not management."""
    if chosen:
        return chosen
    best = next((s for s in subnets if not s.management), None)
    return best.subnet if best else None


def iface_line(node: str, iface: Interface, subnets: list[Subnet], fabric: str | None) -> Content:
    role, role_style = iface_role(node, iface, subnets, fabric)
    state = ("up", "$success") if iface.up else ("down", "$error")
    parts: list = [f"  {iface.name:<14} ", (state[0], state[1]), " ", ", ".join(iface.ipv4) or "no IPv4"]
    if iface.rdma:
        parts.append(f"  {iface.rdma}")
    if iface.speed_mbps:
        parts.append(f"  {iface.speed_mbps // 1000} Gb/s" if iface.speed_mbps >= 1000 else f"  {iface.speed_mbps} Mb/s")
    if iface.rdma and iface.mtu and iface.mtu < JUMBO:  # jumbo frames are the norm on the fabric: said when not
        parts.append((f"  MTU {iface.mtu}", "$warning"))
    if iface.rdma and iface.gid_index is not None:
        parts.append(f"  GID {iface.gid_index}")
    if role:
        parts += ["  ", (role, role_style)]
    return Content.assemble(*parts)


def port_lines(facts: NodeFacts) -> list[Content]:
    """A port whose other half is idle (set down or unaddressed, so not listed with the interfaces): the
    half, its state, and what it costs."""
    out = []
    for port in ports(facts):
        if len(port.halves) < 2 or not any(h.up and h.ipv4 for h in port.halves):
            continue
        for h in port.halves:
            if h.up and h.ipv4:
                continue
            what = ("up" if h.up else (h.state or "down")) + ("" if h.ipv4 else ", no address")
            mtu = f" MTU {h.mtu}" if h.mtu else ""
            out.append(
                Content.assemble(
                    ("  PORT ", "bold"),
                    f"{port.key} ",
                    (f"{h.name} ({h.rdma}) {what}{mtu}", "$warning"),
                    "  ",
                    ("idle half: about half the link", "$warning"),
                )
            )
    return out


def node_card(
    name: str,
    host: str,
    role: str,
    facts: NodeFacts | None,
    link: Link,
    subnets: list[Subnet],
    fabric: str | None,
    missing: list[Need] = (),
    layout: str = "",
    paths: str = "",
) -> Content:
    """The whole card as lines of Content (joined by newlines); layout is the fabric's, as every node's
    addresses describe it ("ring, per-half subnets")."""
    sym, style, words = status(facts, link)
    lines = [Content.assemble((sym, style), " ", (name, "bold"), f"  {host}  {role}  ", (words, style))]
    if facts is None or not facts.reachable:
        return Content("\n").join(lines)
    lines.append(Content.assemble(("GPU ", "bold"), gpu_words(facts)))
    disk = fmt.size(facts.disk_free_bytes) + " free" if facts.disk_free_bytes is not None else "?"
    model: str | tuple[str, str] = ""
    if facts.model is not None:
        model = (
            f"  model {fmt.size(facts.model.bytes)}"
            if facts.model.present
            else (f"  model incomplete ({fmt.size(facts.model.bytes)})", "$error")
            if facts.model.incomplete
            else "  model missing"
        )
    lines.append(Content.assemble(memory_line(facts), ("  DISK ", "bold"), disk, model))
    ctrs = container_words(facts)
    if ctrs:
        parts: list = [("CTR ", "bold")]
        for i, (text, cstyle) in enumerate(ctrs):
            parts += (["  "] if i else []) + [(text, cstyle)]
        lines.append(Content.assemble(*parts))
    else:
        lines.append(Content.assemble(("CTR ", "bold"), ("none", "$text-muted")))
    idle = 0
    halves = port_lines(facts)
    paired = {
        h.name for p in ports(facts) if len(p.halves) > 1 and any(x.up and x.ipv4 for x in p.halves) for h in p.halves
    }
    for iface in facts.interfaces:
        if iface.name == "lo":
            continue
        if iface.name in paired and not (iface.up and iface.ipv4):
            continue  # an idle half: shown on its port's line
        if not iface.up and (not iface.ipv4 or iface.name.startswith(BRIDGES)):
            idle += 1  # a port without carrier or address carries nothing: counted, not listed
            continue
        lines.append(iface_line(name, iface, subnets, fabric))
    lines += halves
    if layout:
        lines.append(Content.assemble(("  FABRIC ", "bold"), layout))
    if paths:  # bootstrap and data apart: a management bootstrap with RDMA data is NVIDIA's own setup
        lines.append(Content.assemble(("  PATHS ", "bold"), paths))
    if idle:
        lines.append(
            Content.styled(f"  +{idle} idle interface{'s' if idle > 1 else ''} (down, no address)", "$text-muted")
        )
    for note in facts.notes[:2]:
        lines.append(Content.assemble(("  note: ", "$warning"), note))
    for need in missing:  # what the node lacks, with the fix (sparktui check lists all of them)
        lines.append(Content.assemble(("  ✗ needs ", "$error"), need.what, ": ", need.fix))
    return Content("\n").join(lines)
