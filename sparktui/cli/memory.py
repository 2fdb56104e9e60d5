"""`sparktui drop-caches`: flush the page cache on nodes, so a GPU on unified memory sees it as free."""

from __future__ import annotations

import argparse
import asyncio

from .common import (
    CliExit,
    add_config_arg,
    add_json_arg,
    confirm,
    console,
    get_config,
    journal,
    not_confirmed,
    print_json,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drop-caches", help="flush the page cache on nodes (after a copy, before a launch)")
    add_config_arg(p)
    p.add_argument("nodes", nargs="*", metavar="NODE", help="nodes to flush (default: every node)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    add_json_arg(p)
    p.set_defaults(func=cmd_drop_caches)


async def cmd_drop_caches(args: argparse.Namespace) -> int:
    from ..core.memory.free import DropPreview, drop_caches
    from ..core.config.yamlpos import unknown_names
    from ..core.remote.ssh import Cluster

    config = get_config(args)
    known = [n.name for n in config.nodes]
    bad = [n for n in args.nodes if n not in known]
    if bad:
        raise CliExit(2, unknown_names("node", bad, known))
    names = args.nodes or known
    if not confirm(DropPreview(names).text() + "\nDrop it?", args.yes):  # the TUI's confirmation text
        raise not_confirmed("nothing done")
    async with Cluster(config, journal=journal()) as cluster:
        results = await asyncio.gather(*(drop_caches(cluster[n]) for n in names))
    if args.json:
        print_json([r.to_json() for r in results])
    else:
        for r in results:
            console.print(r.summary(), markup=False)
    return 0 if all(r.ok for r in results) else 1
