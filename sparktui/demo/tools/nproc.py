"""`nproc` on a simulated node: a DGX Spark's cores (hardware.CPU_CORES), whatever this machine has.

Copies size their parallel streams by the sender's cores (core/transfers/streams.py); on the demo
the node's link model (demo/link.py) is what holds each stream, not this machine's cores.
`nproc --all` and `--ignore=N` answer as GNU nproc would for that many cores.
"""

from __future__ import annotations

import sys

from ..hardware import CPU_CORES


def main(argv: list[str]) -> int:
    n = CPU_CORES
    for i, a in enumerate(argv):
        if a.startswith("--ignore="):
            n -= int(a.split("=", 1)[1])
        elif a == "--ignore" and i + 1 < len(argv):
            n -= int(argv[i + 1])
    print(max(1, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
