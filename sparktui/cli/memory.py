"""`sparktui drop-caches`: flush the page cache on nodes, so a GPU on unified memory sees it as free."""
from __future__ import annotations

import argparse
import asyncio

from .common import CliExit, add_config_arg, add_json_arg, confirm, console, get_config, journal, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drop-caches", help="flush the page cache on nodes (after a copy, before a launch)")
    add_config_arg(p)
    p.add_argument("nodes", nargs="*", metavar="NODE", help="nodes to flush (default: every node)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    add_json_arg(p)
    p.set_defaults(func=cmd_drop_caches)


async def cmd_drop_caches(args: argparse.Namespace) -> int:
    from ..core.fit import gib
    from ..core.memfree import DROP_CACHES, drop_caches
    from ..core.ssh import Cluster

    config = get_config(args)
    known = [n.name for n in config.nodes]
    bad = [n for n in args.nodes if n not in known]
    if bad:
        raise CliExit(2, f"no node named {', '.join(bad)} in the config (nodes: {', '.join(known)})")
    names = args.nodes or known
    if not confirm(f"flush the page cache on {', '.join(names)} (`{DROP_CACHES}`; running programs keep their "
                   f"memory, files are read from disk again)?", args.yes):
        raise CliExit(1, "nothing done")
    async with Cluster(config, journal=journal()) as cluster:
        results = await asyncio.gather(*(drop_caches(cluster[n]) for n in names))
    if args.json:
        print_json([{"node": r.node, "ok": r.ok, "free_after": r.free_after, "error": r.error} for r in results])
    else:
        for r in results:
            console.print(f"{r.node}: " + (f"flushed, {gib(r.free_after)} free" if r.ok else f"failed: {r.error}"),
                          markup=False)
    return 0 if all(r.ok for r in results) else 1
