"""Shared pieces of the TUI tests: the scripted core, waiting on conditions, pane text at a fixed size."""

from __future__ import annotations

import io
import time
from typing import Callable

import pytest
from rich.console import Console

from .fake_core import ScriptedCore
from .samples import spark_config, spark_facts


@pytest.fixture
def config():
    return spark_config()


@pytest.fixture
def core(config):
    return ScriptedCore(config, spark_facts())


async def wait_for(pilot, cond: Callable[[], object], timeout: float = 10.0, what: str = "condition"):
    """Let the app run until cond() is truthy; fail after `timeout` seconds (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await pilot.pause(0.02)


async def submit_form(pilot, app) -> None:
    """Once the nodes are probed, open the launch form and submit its defaults (ctrl+s)."""
    from sparktui.tui.forms.launch_form import LaunchForm

    await wait_for(pilot, lambda: app.inventory_ready, what="inventory")
    await pilot.press("l")
    await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm), what="the launch form")
    await pilot.press("ctrl+s")


def screen_text(app) -> str:
    """The current screen as plain text, as a terminal of the app's size would show it."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        default=False,
        help="rewrite tests/tui/snapshots/ from the current rendering",
    )


async def settled_text(pilot, app, timeout: float = 5.0) -> str:
    """The screen text once two renders in a row agree (layout and refreshes have caught up)."""
    previous = None

    def stable():
        nonlocal previous
        now = screen_text(app)
        same, previous = now == previous, now
        return same

    await wait_for(pilot, stable, timeout, "the screen to settle")
    return previous
