"""`rsync` on a simulated node: the real rsync.

Loopback copies a small checkpoint in a blink; the node's `ssh`, which carries what rsync sends,
paces it to the node's one link, shared by every copy leaving the node (demo/link.py), so a
transfer shows its progress the way a real link would. A local copy (no remote side) is held to
the link's speed with --bwlimit, unless the command sets one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from ..hardware import demo_root


def main(argv: list[str]) -> int:
    here = os.environ.get("SPARKTUI_DEMO_BIN", "")
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != os.path.abspath(here)
    )
    real = shutil.which("rsync", path=path)
    if real is None:
        sys.stderr.write("rsync: not installed on this machine\n")
        return 127
    args = list(argv)
    remote = any(":" in a and not a.startswith("-") for a in args)
    if "--server" not in args and not remote and not any(a.startswith("--bwlimit") for a in args):
        try:
            with open(demo_root() / "demo.json", encoding="utf-8") as f:
                rate = float(json.load(f).get("link_bytes_per_s") or 0)
        except (OSError, ValueError):
            rate = 0
        if rate > 0:
            args.insert(0, f"--bwlimit={max(1, int(rate / 1024))}")
    os.execv(real, [real, *args])
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
