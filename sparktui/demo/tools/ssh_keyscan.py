"""`ssh-keyscan` on a simulated node: the host key of the demo node at each address asked for."""

from __future__ import annotations

import sys

from ..hardware import load
from .peers import table

VALUE_OPTS = {"-T", "-t", "-p", "-f", "-O"}


def main(argv: list[str]) -> int:
    hosts, args = [], list(argv)
    while args:
        a = args.pop(0)
        if a in VALUE_OPTS and args:
            args.pop(0)
        elif not a.startswith("-"):
            hosts += a.split(",")
    me = load()
    peers = table()
    peers.setdefault("localhost", peers.get(me["name"], {}))
    found = 0
    for h in hosts:
        entry = peers.get(h)
        if not entry:
            sys.stderr.write(
                f"{h}: Connection refused\n" if h[:1].isdigit() else f"getaddrinfo {h}: Name or service not known\n"
            )
            continue
        sys.stderr.write(f"# {h}:22 SSH-2.0-AsyncSSH_2 {entry['name']}\n")
        sys.stdout.write(f"{h} {entry['host_key']}\n")
        found += 1
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
