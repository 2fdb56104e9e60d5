"""`sparktui journal`: the remote commands sparktui ran, with node, time, exit code (secrets masked)."""
from __future__ import annotations

import argparse
import time
from dataclasses import asdict

from rich.table import Table

from ..core.journal import default_journal_path, read_journal
from .common import add_json_arg, console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("journal", help="the commands sparktui ran on the nodes")
    add_json_arg(p)
    p.add_argument("--limit", type=int, default=50, help="how many of the latest entries (default 50)")
    p.set_defaults(func=cmd_journal)


def cmd_journal(args: argparse.Namespace) -> int:
    entries = read_journal(default_journal_path(), args.limit)
    if args.json:
        print_json([asdict(e) for e in entries])
        return 0
    t = Table(title=str(default_journal_path()), title_justify="left")
    for col in ("time", "node", "exit", "secs", "command"):
        t.add_column(col, overflow="fold")
    for e in entries:
        t.add_row(time.strftime("%H:%M:%S", time.localtime(e.started)), e.node,
                  "…" if e.exit_status is None else str(e.exit_status),
                  f"{e.duration:.1f}" if e.duration is not None else "", e.command)
    console.print(t)
    return 0
