"""Open the TUI (the default command)."""
from __future__ import annotations

import argparse

from .common import CliExit, get_config


def run_tui(args: argparse.Namespace) -> int:
    config = get_config(args)
    try:
        from ..tui.app import SparkApp
        from ..tui.theming import ThemeError, discover, resolve
    except ImportError as e:
        raise CliExit(1, f"the TUI is not available in this build: {e}") from None
    choice = getattr(args, "theme", None) or config.theme
    try:  # a mistyped theme is bad input: say so before the screen takes over the terminal
        resolve(choice, discover()[0])
    except ThemeError as e:
        where = "--theme" if getattr(args, "theme", None) else f"{config.path or 'config'}: theme"
        raise CliExit(2, f"{where}: {e}") from None
    SparkApp(config, theme=choice).run()
    return 0
