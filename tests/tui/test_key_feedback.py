"""A key either acts or says why not; the palette lists every action, with the reason one cannot run."""

from __future__ import annotations

import asyncio

from textual.command import CommandPalette

from sparktui.tui import actions
from sparktui.tui.app import SparkApp
from sparktui.tui.forms.launch_form import LaunchForm

from .conftest import screen_text, wait_for
from .fake_core import ScriptedCore
from .samples import spark_config, spark_facts


class SlowProbe(ScriptedCore):
    """The first probe comes back only when the test says so."""

    def __init__(self, *a) -> None:
        super().__init__(*a)
        self.probed = asyncio.Event()

    async def start(self) -> None:
        await self.probed.wait()
        await super().start()


def _messages(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_a_key_pressed_before_the_first_probe_runs_once_it_is_in():
    cfg = spark_config()
    core = SlowProbe(cfg, spark_facts())
    app = SparkApp(cfg, controller=core)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("t")
        await wait_for(
            pilot,
            lambda: any("waiting for the nodes' first probe" in m for m in _messages(app)),
            what="a word about the wait",
        )
        assert core.calls == []
        core.probed.set()
        await wait_for(pilot, lambda: ("sync_model", None) in core.calls, what="the sync, once probed")
        assert [c for c in core.calls if c[0] == "sync_model"] == [("sync_model", None)]  # once


async def test_a_key_that_cannot_act_says_why(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("s")
        await wait_for(
            pilot,
            lambda: any("Stop: not now, nothing is deployed" in m for m in _messages(app)),
            what="the reason stop cannot act",
        )
        await pilot.press("f")  # the log's key, pressed on the nodes pane
        await wait_for(pilot, lambda: any("Follow: not now, only on the Launch pane" in m for m in _messages(app)))
        assert ("stop", None) not in core.calls


async def test_ctrl_s_right_after_the_form_appears_launches(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("l", "ctrl+s")  # no pause between them: a fast typist
        await wait_for(pilot, lambda: any(c[0] == "launch" for c in core.calls), what="the launch")
        assert not isinstance(app.screen, LaunchForm)


async def test_the_palette_lists_every_action_with_the_reason_a_disabled_one_cannot_run(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("ctrl+p")
        palette = await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette) and app.screen)
        commands = {c.title: c.help for c in app.get_system_commands(app.screen_stack[-2])}
        assert {a.description for a in actions.ACTIONS} <= set(commands)
        assert commands["Pivot"] == "key p · not now: nothing is deployed to pivot away from"
        assert commands["Launch"] == "key l" and commands["Stop"].startswith("key s · not now")
        assert list(commands).count("Quit") == 1
        await pilot.press(*"pivot")
        await wait_for(pilot, lambda: "not now: nothing is deployed" in screen_text(app), what="pivot in the list")
        await pilot.press("enter")  # chosen anyway: it says why instead of doing nothing
        await wait_for(pilot, lambda: any("Pivot: not now" in m for m in _messages(app)))
        assert not isinstance(app.screen, CommandPalette) and palette is not app.screen
