"""`ping -I IFACE ADDR` on a simulated node: answered from the nodes' descriptions, as the fabric would.

Packets leave only through an interface that is up with an address on the target's subnet, and arrive only
where a node's interface holding that address is up: what `ip link set ... down` on either node changes.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from pathlib import Path

from ..hardware import demo_root, load


def _args(argv: list[str]) -> tuple[str | None, int, str | None]:
    iface, count, target, skip = None, 3, None, False
    for k, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ("-I", "-c", "-i", "-w", "-W"):
            skip = True
            nxt = argv[k + 1] if k + 1 < len(argv) else ""
            iface = nxt if a == "-I" else iface
            count = int(nxt) if a == "-c" and nxt.isdigit() else count
        elif not a.startswith("-"):
            target = a
    return iface, count, target


def _holder(ip: str) -> dict | None:
    """The interface of any demo node that holds ip."""
    demo = json.loads((demo_root() / "demo.json").read_text())
    for n in demo["nodes"]:
        node = json.loads((Path(n["dir"]) / "node.json").read_text())
        for i in node["interfaces"]:
            if i.get("ipv4") and i["ipv4"][0] == ip:
                return i
    return None


def main(argv: list[str]) -> int:
    iface, count, target = _args(argv)
    if target is None:
        sys.stderr.write("ping: usage error: Destination address required\n")
        return 2
    mine = next((i for i in load()["interfaces"] if i["name"] == iface), None) if iface else None
    if iface and mine is None:
        sys.stdout.write(f"ping: SO_BINDTODEVICE {iface}: No such device\n")
        return 2
    if mine is not None and (not mine["up"] or not mine.get("ipv4")):
        sys.stdout.write("ping: connect: Network is unreachable\n")
        return 2
    there = _holder(target)
    same = mine is None or ipaddress.ip_address(target) in ipaddress.ip_network(
        f"{mine['ipv4'][0]}/{mine['ipv4'][1]}", strict=False
    )
    got = count if there is not None and there["up"] and same else 0
    sys.stdout.write(
        f"PING {target}\n--- {target} ping statistics ---\n{count} packets transmitted, {got} received, "
        f"{100 - 100 * got // count}% packet loss, time {200 * count}ms\n"
    )
    return 0 if got else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
