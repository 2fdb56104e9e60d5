"""`ip` on a simulated node: addr, link and route as iproute2 prints them (JSON, one-line, brief, plain).

Reading, and the few changes the plan's fixes name: `ip link set DEV up|down|mtu N` and `ip addr add|del
CIDR dev DEV` rewrite the node's description (hardware.save), as root on a Spark would change its NICs.
Anything else that would change the network answers "Operation not permitted".
"""

from __future__ import annotations

import ipaddress
import json
import sys

from ..hardware import DEFAULT_ROUTE, load, save

FOREVER = 4294967295


def _flags(i: dict) -> list[str]:
    if i["kind"] == "loopback":
        return ["LOOPBACK", "UP", "LOWER_UP"]
    # Not up: set down (a fresh Spark's twin half), so `ip link set DEV up` brings it up.
    return ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"] if i["up"] else ["BROADCAST", "MULTICAST"]


def _state(i: dict) -> str:
    return "UNKNOWN" if i["kind"] == "loopback" else ("UP" if i["up"] else "DOWN")


def _brd(i: dict) -> str | None:
    if not i["ipv4"] or i["kind"] == "loopback":
        return None
    return str(ipaddress.IPv4Network(f"{i['ipv4'][0]}/{i['ipv4'][1]}", strict=False).broadcast_address)


def _link_json(n: int, i: dict) -> dict:
    d = {
        "ifindex": n,
        "ifname": i["name"],
        "flags": _flags(i),
        "mtu": i["mtu"],
        "qdisc": "noqueue" if i["kind"] == "loopback" else "mq",
        "operstate": _state(i),
        "group": "default",
        "txqlen": 1000,
        "link_type": i["kind"],
        "address": i["mac"],
        "broadcast": "00:00:00:00:00:00" if i["kind"] == "loopback" else "ff:ff:ff:ff:ff:ff",
    }
    return d


def _addr_json(n: int, i: dict, v4: bool, v6: bool) -> dict:
    d = _link_json(n, i)
    info = []
    if i["ipv4"] and v4:
        a = {"family": "inet", "local": i["ipv4"][0], "prefixlen": i["ipv4"][1]}
        if _brd(i):
            a["broadcast"] = _brd(i)
        a.update(
            scope="host" if i["kind"] == "loopback" else "global",
            label=i["name"],
            valid_life_time=FOREVER,
            preferred_life_time=FOREVER,
        )
        info.append(a)
    if i["kind"] == "loopback" and v6:
        info.append(
            {
                "family": "inet6",
                "local": "::1",
                "prefixlen": 128,
                "scope": "host",
                "valid_life_time": FOREVER,
                "preferred_life_time": FOREVER,
            }
        )
    d["addr_info"] = info
    return d


def _head(n: int, i: dict) -> str:
    qdisc = "noqueue" if i["kind"] == "loopback" else "mq"
    return (
        f"{n}: {i['name']}: <{','.join(_flags(i))}> mtu {i['mtu']} qdisc {qdisc} state {_state(i)} "
        f"group default qlen 1000"
    )


def _inet(i: dict) -> str:
    scope = "host" if i["kind"] == "loopback" else "global"
    brd = f" brd {_brd(i)}" if _brd(i) else ""
    return f"inet {i['ipv4'][0]}/{i['ipv4'][1]}{brd} scope {scope} {i['name']}"


def _link_line(i: dict) -> str:
    brd = "00:00:00:00:00:00" if i["kind"] == "loopback" else "ff:ff:ff:ff:ff:ff"
    return f"link/{i['kind']} {i['mac']} brd {brd}"


def show(obj: str, opts: set[str], ifaces: list[dict]) -> str:
    v4, v6 = "-6" not in opts, "-4" not in opts
    rows = list(enumerate(ifaces, 1))
    if "-j" in opts:
        data = [_addr_json(n, i, v4, v6) if obj == "addr" else _link_json(n, i) for n, i in rows]
        if obj == "addr" and ("-4" in opts or "-6" in opts):
            data = [d for d in data if d["addr_info"]]
        return (json.dumps(data, indent=4) if "-p" in opts else json.dumps(data, separators=(",", ":"))) + "\n"
    out = []
    for n, i in rows:
        if "-br" in opts:
            addrs = (f"{i['ipv4'][0]}/{i['ipv4'][1]} " if i["ipv4"] and v4 else "") + (
                "::1/128 " if i["kind"] == "loopback" and v6 else ""
            )
            if obj == "addr":
                out.append(f"{i['name']:<16} {_state(i):<14} {addrs}")
            else:
                out.append(f"{i['name']:<16} {_state(i):<14} {i['mac']} <{','.join(_flags(i))}>")
        elif "-o" in opts:
            if obj == "addr" and i["ipv4"] and v4:
                out.append(f"{n}: {i['name']}    {_inet(i)}\\       valid_lft forever preferred_lft forever")
            elif obj == "link":
                out.append(f"{_head(n, i)}\\    {_link_line(i)}")
        else:
            if obj == "addr" and "-4" in opts and not i["ipv4"]:
                continue
            out.append(_head(n, i))
            if "-4" not in opts:
                out.append("    " + _link_line(i))
            if obj == "addr" and i["ipv4"] and v4:
                out += ["    " + _inet(i), "       valid_lft forever preferred_lft forever"]
    return "".join(line + "\n" for line in out)


def routes(ifaces: list[dict], opts: set[str]) -> str:
    nets = []
    default = None
    for i in ifaces:
        if not i["ipv4"] or i["kind"] == "loopback" or not i["up"]:
            continue
        net = ipaddress.IPv4Network(f"{i['ipv4'][0]}/{i['ipv4'][1]}", strict=False)
        nets.append(
            {
                "dst": str(net),
                "dev": i["name"],
                "protocol": "kernel",
                "scope": "link",
                "prefsrc": i["ipv4"][0],
                "flags": [],
            }
        )
        if i["name"] == DEFAULT_ROUTE:
            default = {
                "dst": "default",
                "gateway": str(net.network_address + 1),
                "dev": i["name"],
                "protocol": "dhcp",
                "metric": 600,
                "flags": [],
            }
    table = ([default] if default else []) + nets
    if "-j" in opts:
        return json.dumps(table, separators=(",", ":")) + "\n"
    out = []
    for r in table:
        if r["dst"] == "default":
            out.append(f"default via {r['gateway']} dev {r['dev']} proto dhcp metric 600 ")
        else:
            out.append(f"{r['dst']} dev {r['dev']} proto kernel scope link src {r['prefsrc']} ")
    return "".join(line + "\n" for line in out)


def route_get(target: str, ifaces: list[dict]) -> str:
    try:
        ip = ipaddress.IPv4Address(target)
    except ValueError:
        raise SystemExit(f'Error: any valid prefix is expected rather than "{target}".') from None
    for i in ifaces:
        if i["ipv4"] and i["ipv4"][0] == target:
            return f"local {target} dev lo src {target} uid 0 \n    cache <local> \n"
    for i in ifaces:
        if (
            i["ipv4"]
            and i["kind"] != "loopback"
            and i["up"]
            and ip in ipaddress.IPv4Network(f"{i['ipv4'][0]}/{i['ipv4'][1]}", strict=False)
        ):
            return f"{target} dev {i['name']} src {i['ipv4'][0]} uid 0 \n    cache \n"
    wlan = next((i for i in ifaces if i["name"] == DEFAULT_ROUTE and i["ipv4"]), None)
    if wlan is None:
        sys.stderr.write("RTNETLINK answers: Network is unreachable\n")
        raise SystemExit(2)
    gw = ipaddress.IPv4Network(f"{wlan['ipv4'][0]}/{wlan['ipv4'][1]}", strict=False).network_address + 1
    return f"{target} via {gw} dev {DEFAULT_ROUTE} src {wlan['ipv4'][0]} uid 0 \n    cache \n"


def _find(ifaces: list[dict], name: str) -> dict:
    found = next((i for i in ifaces if i["name"] == name), None)
    if found is None:
        raise SystemExit(f'Cannot find device "{name}"')
    return found


def link_set(node: dict, args: list[str]) -> None:
    """`ip link set [dev] DEV {up | down | mtu N}...` as iproute2 takes it."""
    if args and args[0] == "dev":
        args = args[1:]
    if not args:
        raise SystemExit('Not enough information: "dev" argument is required.')
    iface = _find(node["interfaces"], args[0])
    rest = args[1:]
    while rest:
        word = rest.pop(0)
        if word in ("up", "down"):
            iface["up"] = word == "up"
        elif word == "mtu" and rest and rest[0].isdigit() and 68 <= int(rest[0]) <= 9216:
            iface["mtu"] = int(rest.pop(0))  # a CX7 takes up to 9216 (9978 on newer firmware)
        elif word == "mtu":
            raise SystemExit(f'Error: argument "{rest[0] if rest else ""}" is wrong: Invalid "mtu" value')
        else:
            raise SystemExit(f'Error: either "dev" is duplicate, or "{word}" is a garbage.')
    save(node)


def addr_change(node: dict, cmd: str, args: list[str]) -> None:
    """`ip addr add|del CIDR dev DEV`: one IPv4 address per NIC here, as the demo's NICs hold."""
    if len(args) != 3 or args[1] != "dev":
        raise SystemExit("Usage: ip address {add|del} IFADDR dev IFNAME")
    try:
        ipi = ipaddress.IPv4Interface(args[0] if "/" in args[0] else args[0] + "/32")
    except ValueError:
        raise SystemExit(f'Error: any valid prefix is expected rather than "{args[0]}".') from None
    iface = _find(node["interfaces"], args[2])
    if cmd == "add":
        if iface["ipv4"]:
            raise SystemExit("RTNETLINK answers: File exists")  # the demo's NICs hold one address each
        iface["ipv4"] = [str(ipi.ip), ipi.network.prefixlen]
    elif iface["ipv4"] and iface["ipv4"][0] == str(ipi.ip):
        iface["ipv4"] = None
    else:
        raise SystemExit("RTNETLINK answers: Cannot assign requested address")
    save(node)


OBJECTS = {
    "a": "addr",
    "ad": "addr",
    "addr": "addr",
    "address": "addr",
    "l": "link",
    "li": "link",
    "link": "link",
    "r": "route",
    "ro": "route",
    "route": "route",
}
OPTIONS = {
    "-j": "-j",
    "-json": "-j",
    "--json": "-j",
    "-4": "-4",
    "-6": "-6",
    "-o": "-o",
    "-oneline": "-o",
    "-br": "-br",
    "-brief": "-br",
    "-p": "-p",
    "-pretty": "-p",
    "-d": "-d",
    "-details": "-d",
    "-s": "-s",
    "-stats": "-s",
    "-c": "-c",
    "-color": "-c",
}


def main(argv: list[str]) -> int:
    opts: set[str] = set()
    args = list(argv)
    while args and args[0].startswith("-"):
        a = args.pop(0)
        if a.startswith("-c") or a.startswith("--color"):
            continue
        if a not in OPTIONS:
            sys.stderr.write(f'Option "{a}" is unknown, try "ip -help".\n')
            return 255
        opts.add(OPTIONS[a])
    if not args:
        sys.stderr.write("Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }\n")
        return 255
    obj = OBJECTS.get(args.pop(0))
    if obj is None:
        sys.stderr.write('Object is unknown, try "ip help".\n')
        return 255
    cmd = args.pop(0) if args else "show"
    node = load()
    ifaces = node["interfaces"]
    if obj == "link" and cmd == "set":
        link_set(node, args)
        return 0
    if obj == "addr" and cmd in ("add", "a", "del", "delete", "d"):
        addr_change(node, "add" if cmd in ("add", "a") else "del", args)
        return 0
    if obj == "route":
        if cmd in ("show", "list", "ls"):
            sys.stdout.write(routes(ifaces, opts))
            return 0
        if cmd == "get" and args:
            sys.stdout.write(route_get(args[0], ifaces))
            return 0
    elif cmd in ("show", "list", "ls", "sh", "s"):
        if args and args[0] == "dev":
            args.pop(0)
        if args:
            wanted = [i for i in ifaces if i["name"] == args[0]]
            if not wanted:
                sys.stderr.write(f'Device "{args[0]}" does not exist.\n')
                return 1
            ifaces = wanted
        sys.stdout.write(show(obj, opts, ifaces))
        return 0
    sys.stderr.write("RTNETLINK answers: Operation not permitted\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
