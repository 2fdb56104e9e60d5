"""Pieces every CLI command shares: config loading with clean errors, JSON output, the journal."""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ..core.config import Config
    from ..core.journal import Journal

console: "Console"  # made on first use (see __getattr__): `--version` needs no rich
err_console: "Console"


def __getattr__(name: str):
    if name in ("console", "err_console"):
        if name in globals():
            return globals()[name]
        from rich.console import Console

        made = Console(stderr=name == "err_console", highlight=False)
        globals()[name] = made
        return made
    raise AttributeError(name)


class CliExit(Exception):
    """Stop the command with an exit code after printing `message` to stderr."""

    def __init__(self, code: int, message: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message


def checked(fn, *extra):
    """An argparse type from a core.argcheck check: its sentence (the value shortened) is the error, exit 2."""
    def conv(value: str):
        try:
            return fn(value, *extra)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    conv.__name__ = fn.__name__
    return conv


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", metavar="FILE", default=argparse.SUPPRESS,
                   help="config file (default: $SPARKTUI_CONFIG, ./sparktui.yaml, ~/.config/sparktui/config.yaml)")


def add_json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def get_config(args: argparse.Namespace) -> Config:
    """The config named by --config (or found), or exit 2 with FILE:LINE:COL: message."""
    from ..core.config import ConfigError, find_config, load_config

    try:
        return load_config(find_config(getattr(args, "config", None)))
    except ConfigError as e:
        raise CliExit(2, str(e)) from None


def journal() -> Journal:
    from ..core.journal import Journal, default_journal_path

    return Journal(default_journal_path())


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def confirm(question: str, assume_yes: bool) -> bool:
    """Ask on the terminal; refuse (False) when there is no terminal to ask on."""
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        __getattr__("err_console").print(f"{question} — not confirmed (no terminal); pass --yes to proceed")
        return False
    return __getattr__("console").input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
