"""The real app in a real terminal: one tmux server of our own per test (its own -L socket, so
nothing else on the machine is touched), driven by keys and read from the screen.

A screen is read whole and a condition is waited for, never a single capture assumed complete:
the app repaints parts of the screen (the footer when bindings change, toasts) between captures.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable

SESSION = "app"


class Tmux:
    def __init__(
        self, command: str, width: int, height: int, env: dict[str, str] | None = None, prefix: str = "sparktui-test"
    ) -> None:
        self.socket = f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.env = env
        self("new-session", "-d", "-s", SESSION, "-x", str(width), "-y", str(height), command)

    def __call__(self, *args: str, check: bool = True) -> str:
        r = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, env=self.env, timeout=30)
        if check and r.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", SESSION, check=False)

    def wait_for(self, what: str | Callable[[str], object], timeout: float = 30.0, describe: str = "") -> str:
        """The first screen that shows `what` (a text, or a predicate over the screen's text)."""
        holds = (lambda s: what in s) if isinstance(what, str) else what
        describe = describe or (repr(what) if isinstance(what, str) else "the condition")
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if holds(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{describe} not on screen after {timeout:g} s:\n{screen}")
            time.sleep(0.1)  # polling a terminal we do not own; bounded by the deadline above

    def wait_for_all(self, *texts: str, timeout: float = 30.0) -> str:
        """The first screen that shows every one of `texts`: one capture can catch a frame drawn in part."""
        return self.wait_for(lambda s: all(t in s for t in texts), timeout, " and ".join(map(repr, texts)))

    def wait_gone(self, text: str, timeout: float = 10.0) -> None:
        self.wait_for(lambda s: text not in s, timeout, f"{text!r} gone")

    def keys(self, *keys: str) -> None:
        self("send-keys", "-t", SESSION, *keys)

    def running(self) -> bool:
        return SESSION in self("list-sessions", "-F", "#{session_name}", check=False).split()

    def wait_exit(self, timeout: float = 20.0) -> None:
        """The app's session ends (the command exited)."""
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() > deadline:
                raise AssertionError("the app did not exit:\n" + self.screen())
            time.sleep(0.1)  # as in wait_for

    def close(self) -> None:
        """Stop this server and remove its socket file (tmux leaves it behind)."""
        self("kill-server", check=False)
        base = Path((self.env or os.environ).get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (base / self.socket).unlink(missing_ok=True)


def app_command(env: dict[str, str], *argv: str, unset: tuple[str, ...] = ()) -> str:
    """A shell command running argv with env, without the test runner's COLUMNS/LINES (they would
    override the terminal's real size) nor the variables named in unset."""
    import shlex

    drop = " ".join(f"-u {name}" for name in ("COLUMNS", "LINES", *unset))
    return f"env {drop} " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(argv)


def flat(screen: str) -> str:
    """A screen's text on one line: a notice wraps wherever the terminal's width puts it."""
    return " ".join(screen.split())


def footer(screen: str) -> str:
    """The bottom line of a capture (capture-pane prints every row, blank ones too)."""
    lines = screen.splitlines()
    return lines[-1] if lines else ""
