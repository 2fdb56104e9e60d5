"""Open the TUI (the default command), and the checks every TUI front makes before taking the screen."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from ..core.config.config import ConfigNotFound, find_config, user_config_path
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


def check_theme(choice: str | None, where: str = "--theme") -> None:
    """A mistyped theme is bad input: exit 2 naming the known themes, before anything starts."""
    if not choice:
        return
    try:
        from ..tui.theming import ThemeError, discover, resolve
    except ImportError:
        return  # no TUI in this build: the theme cannot matter
    try:
        resolve(choice, discover()[0])
    except ThemeError as e:
        raise CliExit(2, f"{where}: {e}") from None


def need_terminal(instead: str) -> None:
    """The TUI reads keys from stdin and draws with escape codes (on stderr, where Textual writes):
    without a terminal they would land in a file or a pipe."""
    missing = [
        name
        for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))
        if stream is None or not stream.isatty()
    ]
    if missing:
        raise CliExit(
            2,
            f"sparktui: the TUI needs a terminal ({', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one); {instead}",
        )


EXIT_GRACE_S = 10.0  # after SIGTERM or SIGHUP: the app's own shutdown, then a forced exit


def run_app(app: Any, on_forced_exit: Callable[[], None] | None = None) -> Any:
    """app.run(), with SIGTERM and SIGHUP (`kill`, a closed terminal) ending the app the normal way:
    the terminal restored and what it started stopped, within a short wait for the nodes' links.

    A closed terminal can leave that way stuck: Textual's output thread dies on the hung-up terminal's
    first failed write and the app's next writes wait on its full queue for ever. So a signal also arms
    a guard: if the app has not ended EXIT_GRACE_S later, on_forced_exit (what must not outlive us,
    such as the demo's nodes) runs and the process exits as the signal would have ended it."""
    ended = threading.Event()
    guard: list[threading.Thread] = []

    def force(signum: int) -> None:
        if ended.wait(EXIT_GRACE_S):
            return
        if on_forced_exit is not None:
            with contextlib.suppress(Exception):
                on_forced_exit()
        os._exit(128 + signum)

    def end(signum: int, _frame: object = None) -> None:
        app.close_timeout = 1.0  # leaving on a signal: a dead link must not hold the exit up
        if not guard:
            guard.append(threading.Thread(target=force, args=(signum,), name="sparktui-exit-guard", daemon=True))
            guard[0].start()
        with contextlib.suppress(Exception):
            app.exit()

    before = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
            before[sig] = signal.signal(sig, end)
    try:
        return app.run()
    finally:
        ended.set()
        for sig, handler in before.items():
            signal.signal(sig, handler)
        # The interpreter's last collections over a TUI's many objects took seconds on the way out;
        # nothing left needs them (links, nodes and files are closed by now).
        gc.freeze()


def run_tui(args: argparse.Namespace) -> int:
    instead = "use a headless command instead, such as `sparktui status` or `sparktui check --json`"
    target = first_run_target(args)
    if target is not None:
        need_terminal("`sparktui init` writes a config without one")
        from ..core.state.journal import Journal, default_journal_path
        from ..tui.setup_app import SetupApp

        written = run_app(SetupApp(target, journal=Journal(default_journal_path())))
        if written is None:
            return 0  # the user left the setup; nothing was written
        args.config = str(written)
    config = get_config(args)
    if importlib.util.find_spec("textual") is None:
        raise CliExit(1, "the TUI is not available in this build: Textual is not installed")
    choice = getattr(args, "theme", None) or config.theme
    check_theme(choice, "--theme" if getattr(args, "theme", None) else f"{config.path or 'config'}: theme")
    need_terminal(instead)
    from ..tui.controller import Controller  # no Textual in it: the nodes are dialled first

    controller = Controller(config)
    controller.prestart()  # the probes run on the nodes while the screen's code loads and the screen is built
    try:
        from ..tui.app import SparkApp
    except ImportError as e:
        controller.abandon()
        raise CliExit(1, f"the TUI is not available in this build: {e}") from None
    run_app(SparkApp(config, controller=controller, theme=choice))
    return 0
