"""`ibdev2netdev` on a simulated node: the ConnectX-7 port and its twin, as Mellanox's script prints them."""

from __future__ import annotations

import sys

from ..hardware import load


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    for i in load()["interfaces"]:
        if not i.get("rdma"):
            continue
        state = "Up" if i["up"] else "Down"
        if verbose:
            port = "ACTIVE" if i["up"] else "DOWN"
            sys.stdout.write(
                f"0000:01:00.1 {i['rdma']} (MT4129 - MCX750500B-0D00) NVIDIA ConnectX-7 fw 28.45.1020 "
                f"port 1 ({port}) ==> {i['name']} ({state})\n"
            )
        else:
            sys.stdout.write(f"{i['rdma']} port 1 ==> {i['name']} ({state})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
