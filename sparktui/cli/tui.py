"""Open the TUI (the default command)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..core.config import ConfigNotFound, find_config, user_config_path
from .common import CliExit, get_config


def first_run_target(args: argparse.Namespace) -> Path | None:
    """Where the setup screen writes when no config exists: the file named (--config or
    $SPARKTUI_CONFIG) when it is missing, else the user's config path; None when a config exists."""
    try:
        find_config(getattr(args, "config", None))
        return None
    except ConfigNotFound:
        named = getattr(args, "config", None) or os.environ.get("SPARKTUI_CONFIG")
        target = Path(os.path.expanduser(named)) if named else user_config_path()
        if target.exists():  # named but not a file: the loader's message says so
            return None
        return target


def run_tui(args: argparse.Namespace) -> int:
    target = first_run_target(args)
    if target is not None:
        from ..tui.setup_app import SetupApp

        written = SetupApp(target).run()
        if written is None:
            return 0  # the user left the setup; nothing was written
        args.config = str(written)
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
