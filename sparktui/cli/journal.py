"""`sparktui journal`: the remote commands sparktui ran, with node, time, exit code (secrets masked).

One cluster at a time: the config's (the same file as every other command finds), or `--all`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict

from rich.table import Table
from rich.text import Text

from ..core.config import argcheck
from ..core.state.journal import default_journal_path, tail_journal
from ..core.state.statefile import StateFileError
from .common import CliExit, add_config_arg, add_json_arg, checked, console, err_console, get_config, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("journal", help="the commands sparktui ran on the nodes of the config's cluster")
    add_config_arg(p)
    add_json_arg(p)
    p.add_argument(
        "--limit",
        type=checked(argcheck.count, "--limit"),
        default=50,
        help="how many of the latest entries (default 50)",
    )
    p.add_argument("--all", action="store_true", help="every cluster's commands, the demo's too")
    p.set_defaults(func=cmd_journal)


def cmd_journal(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliExit(2, "--limit must be at least 1")
    cluster = None
    if not args.all:
        try:
            cluster = get_config(args).cluster
        except CliExit as e:
            raise CliExit(
                e.code, f"{e.message}\n(`sparktui journal --all` shows every cluster's commands without a config)"
            ) from None
    path = default_journal_path()
    try:
        tail = tail_journal(path, args.limit, cluster=cluster)
    except StateFileError as e:
        raise CliExit(1, e.line(), reason=e.problem, fix=e.fix) from None
    entries = tail.entries
    if tail.warning():
        err_console.print(tail.warning(), markup=False, soft_wrap=True)
    if args.json:
        print_json([asdict(e) for e in entries])
        return 0
    scope = "every cluster" if cluster is None else f"cluster {cluster} (--all for every cluster)"
    t = Table(title=f"{path}: {scope}", title_justify="left")
    columns = (
        ("time", "node", "exit", "secs", "command")
        if cluster
        else ("time", "cluster", "node", "exit", "secs", "command")
    )
    for col in columns:
        t.add_column(col, overflow="fold")
    for e in entries:
        cells = [
            time.strftime("%H:%M:%S", time.localtime(e.started)),
            e.node,
            "…" if e.exit_status is None else str(e.exit_status),
            f"{e.duration:.1f}" if e.duration is not None else "",
            e.command,
        ]
        if cluster is None:
            cells.insert(1, e.cluster or "—")
        t.add_row(*(Text(c) for c in cells))  # a command's [brackets] are text, not markup
    console.print(t)
    if not entries:
        console.print(f"no commands recorded for {scope.split(' (')[0]} yet", markup=False)
    return 0
