"""This machine's IPv4 interfaces, and the address an engine would publish for itself.

SPARKTUI_SIM_INTERFACES ("name=addr/prefix,...") replaces what the kernel reports, so several
simulated nodes can share one host (127.0.0.0/8 is all loopback) yet each see its own networks.
With it set, binding an address outside that list fails like the kernel would (EADDRNOTAVAIL).
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import socket
import struct
from dataclasses import dataclass

SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891B


@dataclass(frozen=True)
class Iface:
    name: str
    address: str
    prefix: int

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"{self.address}/{self.prefix}", strict=False)

    @property
    def loopback(self) -> bool:
        # by name: simulated nodes use 127.x addresses on interfaces that stand for real NICs
        return self.name == "lo"


def parse_interfaces(spec: str) -> list[Iface]:
    """Parse "eth0=10.0.0.2/24,lo=127.0.0.1/8"; raises ValueError with the bad entry."""
    out = []
    for entry in (e.strip() for e in spec.split(",")):
        if not entry:
            continue
        name, sep, cidr = entry.partition("=")
        if not sep or not name:
            raise ValueError(f"bad interface entry {entry!r} (expected name=addr/prefix)")
        addr, _, prefix = cidr.partition("/")
        ipaddress.IPv4Address(addr)
        out.append(Iface(name.strip(), addr, int(prefix or 32)))
    return out


def _kernel_interfaces() -> list[Iface]:
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            req = struct.pack("256s", name.encode()[:15])
            try:
                addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)[20:24])
                mask = socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFNETMASK, req)[20:24])
            except OSError:
                continue  # no IPv4 address on this one
            out.append(Iface(name, addr, ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen))
    return out


def interfaces() -> list[Iface]:
    spec = os.environ.get("SPARKTUI_SIM_INTERFACES", "").strip()
    return parse_interfaces(spec) if spec else _kernel_interfaces()


def overridden() -> bool:
    return bool(os.environ.get("SPARKTUI_SIM_INTERFACES", "").strip())


def is_local(address: str, ifaces: list[Iface] | None = None) -> bool:
    """Whether `address` belongs to this (possibly simulated) machine: an interface's own address, or
    any other address of lo's network that no other interface's subnet claims (so on a simulated node,
    a neighbour's address on a shared subnet is not ours even though 127.0.0.0/8 is all loopback)."""
    if address in ("0.0.0.0", ""):
        return True
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        return False
    ifaces = interfaces() if ifaces is None else ifaces
    if any(i.address == address for i in ifaces):
        return True
    if any(ip in i.network for i in ifaces if not i.loopback):
        return False
    return any(ip in i.network for i in ifaces if i.loopback)


def check_bindable(host: str) -> None:
    """Raise the kernel's EADDRNOTAVAIL when a simulated machine does not own `host`."""
    if overridden() and not is_local(host):
        raise OSError(errno.EADDRNOTAVAIL, os.strerror(errno.EADDRNOTAVAIL))


def source_for(target: str) -> str | None:
    """With simulated interfaces, the address to bind before connecting to `target` (what the kernel's
    source selection would give that machine); None lets the kernel choose."""
    if not overridden():
        return None
    try:
        ip = ipaddress.IPv4Address(target)
    except ValueError:
        return None
    ifaces = interfaces()
    for iface in ifaces:
        if ip in iface.network and not iface.loopback:
            return iface.address
    for iface in ifaces:
        if ip in iface.network:
            return iface.address
    others = [i for i in ifaces if not i.loopback]
    return others[0].address if others else None


def default_route_iface() -> str | None:
    """Interface of the IPv4 default route: SPARKTUI_SIM_DEFAULT_ROUTE with simulated interfaces
    (none when unset), else the kernel's, from /proc/net/route."""
    if overridden():
        return os.environ.get("SPARKTUI_SIM_DEFAULT_ROUTE", "").strip() or None
    try:
        with open("/proc/net/route") as f:
            next(f, None)
            for line in f:
                cols = line.split()
                if len(cols) > 7 and cols[1] == "00000000" and cols[7] == "00000000":
                    return cols[0]
    except OSError:
        return None
    return None


def auto_ip(ifaces: list[Iface] | None = None, route_iface: str | None = None) -> str | None:
    """What the engines' get_ip() finds without SGLANG_HOST_IP/VLLM_HOST_IP: the address of the
    default-route interface (they ask the kernel for a route to a public address, sending nothing).
    None when there is no default route (the engines then fall back to 0.0.0.0 with a warning)."""
    ifaces = interfaces() if ifaces is None else ifaces
    route_iface = default_route_iface() if route_iface is None else route_iface
    for iface in ifaces:
        if iface.name == route_iface:
            return iface.address
    return None


def other_network_ip(
    rendezvous_addr: str, ifaces: list[Iface] | None = None, route_iface: str | None = None
) -> str | None:
    """An address on a network other than the rendezvous one, as an engine that picks its own address
    finds it: the default-route interface's when that is off the rendezvous subnet, else the interface
    whose name sorts first among non-loopback interfaces that do not hold or share the rendezvous address."""
    ifaces = interfaces() if ifaces is None else ifaces
    route_iface = default_route_iface() if route_iface is None else route_iface
    try:
        rdv = ipaddress.IPv4Address(rendezvous_addr)
    except ValueError:
        rdv = None
    candidates = sorted(
        (
            i
            for i in ifaces
            if not i.loopback and i.address != rendezvous_addr and (rdv is None or rdv not in i.network)
        ),
        key=lambda i: i.name,
    )
    for iface in candidates:
        if iface.name == route_iface:
            return iface.address
    return candidates[0].address if candidates else None


def queue_bind_address(published: str, rendezvous_local: str, ifaces: list[Iface] | None = None) -> str:
    """Where a node's message-queue listener binds: the published address when it is this node's own
    address on the rendezvous network, else the node's rendezvous address (so a published address on
    another network is refused, as an unreachable one would be)."""
    ifaces = interfaces() if ifaces is None else ifaces
    try:
        pub = ipaddress.IPv4Address(published)
        rdv = ipaddress.IPv4Address(rendezvous_local)
    except ValueError:
        return rendezvous_local
    if published == rendezvous_local or not is_local(published, ifaces):
        return rendezvous_local
    for iface in ifaces:
        holds = iface.address == rendezvous_local or (iface.loopback and rdv in iface.network)
        if holds and pub in iface.network:
            return published
    return rendezvous_local
