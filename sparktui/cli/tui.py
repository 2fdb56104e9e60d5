"""Open the TUI (the default command)."""
from __future__ import annotations

import argparse

from .common import CliExit, get_config


def run_tui(args: argparse.Namespace) -> int:
    config = get_config(args)
    try:
        from ..tui.app import SparkApp
    except ImportError as e:
        raise CliExit(1, f"the TUI is not available in this build: {e}") from None
    SparkApp(config, theme=getattr(args, "theme", None)).run()
    return 0
