"""`sparktui`: the TUI by default, and every operation as a headless command with --json."""
from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys

from .. import __version__
from .common import CliExit, add_config_arg, err_console

# Each module adds its subcommands with register(subparsers).
COMMAND_MODULES = ["check", "plan", "diagnose", "sync", "deploy", "journal", "demo", "preflight", "init"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sparktui", description=__doc__)
    p.add_argument("--version", action="version", version=f"sparktui {__version__}")
    add_config_arg(p)
    p.add_argument("--theme", metavar="NAME", help="TUI theme (dark, light, high-contrast or a file's name)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}":
                continue  # command group not part of this build
            raise
        mod.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    try:
        if getattr(args, "theme", None):  # checked for every command, so `--theme neon demo` stops here
            from .tui import check_theme

            check_theme(args.theme)
        if func is None:
            from .tui import run_tui  # the TUI is the default command

            func = run_tui
        result = func(args)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except CliExit as e:
        if e.message:
            err_console.print(e.message, markup=False)
        return e.code
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130


def entry() -> None:
    sys.exit(main())
