"""One registry of keys: bindings with ids, the user's keymap, greyed-out keys, help and palette."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from textual.widgets import Footer

from sparktui.tui import actions
from sparktui.tui.app import SparkApp
from sparktui.tui.forms.launch_form import LaunchForm
from sparktui.tui.screens.confirm import ConfirmScreen
from sparktui.tui.screens.help import HelpScreen

from .conftest import wait_for
from .fake_core import ScriptedCore
from .samples import spark_config, spark_facts


def state(**kw):
    base = dict(
        deploy_state="idle",
        inventory_ready=True,
        running=frozenset(),
        has_plan=False,
        log_visible=False,
        modal=False,
        typing=False,
    )
    base.update(kw)
    return SimpleNamespace(**base)


def test_every_binding_has_a_unique_id_and_an_action_method():
    ids = [b.id for b in actions.bindings()]
    assert len(ids) == len(set(ids)) and None not in ids
    for a in actions.ACTIONS:
        assert callable(getattr(SparkApp, f"action_{a.action}", None)), a.action
    assert {a.id for a in actions.ACTIONS if a.dangerous} == {"pivot", "redeploy", "stop", "drop_caches"}


def test_predicates():
    assert actions.state_of("launch", state()) is True
    assert actions.state_of("launch", state(inventory_ready=False)) is None  # greyed, still shown
    assert actions.state_of("stop", state()) is None
    assert actions.state_of("stop", state(deploy_state="hung")) is True
    assert actions.state_of("pivot", state(running=frozenset({"launch"}))) is True  # a launch on its way
    assert actions.state_of("launch", state(deploy_state="ready")) is None
    assert actions.state_of("sync_model", state(running=frozenset({"sync_model"}))) is None
    assert actions.state_of("follow", state(log_visible=True)) is True
    # pane keys inside a modal are not ours: False lets the focused widget have tab
    assert actions.state_of("next_pane", state(modal=True)) is False
    assert actions.state_of("not_an_action", state()) is True


def test_help_rows_follow_the_keymap():
    rows = actions.help_rows(state(), {"launch": "f5,ctrl+l"})
    launch = next(r for r in rows if r[2] == "launch")
    assert launch[0] == "f5, ctrl+l"
    stop = next(r for r in rows if r[2] == "stop")
    assert stop[3].startswith("not now")
    assert next(r for r in rows if r[2] == "filter")[0] == "/"


async def test_keymap_remaps_a_binding():
    cfg = spark_config(keymap={"launch": "f5"})
    app = SparkApp(cfg, controller=ScriptedCore(cfg, spark_facts()))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("l")
        await pilot.pause()
        assert not isinstance(app.screen, LaunchForm)
        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm), what="form on f5")


async def test_keys_that_cannot_act_are_greyed_not_hidden(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.pause()
        active = {b.binding.id: b for b in app.active_bindings.values()}
        assert active["stop"].enabled is False and active["launch"].enabled is True
        footer = app.query_one(Footer)
        keys = {k.action: k for k in footer.query("FooterKey")}
        assert keys["stop"].disabled is True or keys["stop"].has_class("-disabled")
        await pilot.press("s")  # does nothing: no confirmation for a deployment that is not there
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)


async def test_help_and_palette_list_the_registry(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert {"Launch", "Sync model", "Sync image"} <= set(commands)
        assert "not now" in commands["Stop"] and "not now" not in commands["Launch"]  # offered, with the reason
        await pilot.press("question_mark")
        help_screen = await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen)
        assert {r[2] for r in help_screen.rows} == {a.id for a in actions.ACTIONS}
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_tab_cycles_panes_and_stays_in_forms(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        seen = [app._active_pane()]
        for _ in range(4):
            await pilot.press("tab")
            seen.append(app._active_pane())
        assert seen == ["pane-nodes", "pane-transfers", "pane-launch", "pane-journal", "pane-nodes"]
        await pilot.press("shift+tab")
        assert app._active_pane() == "pane-journal"
        await pilot.press("l")
        form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen)
        first = app.focused
        await pilot.press("tab")
        assert app.focused is not first and app._active_pane() == "pane-journal"  # focus moved inside the form
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, LaunchForm))
        assert form.plan is not None


async def test_an_unknown_keymap_id_is_reported():
    cfg = spark_config(keymap={"lanuch": "f5"})
    app = SparkApp(cfg, controller=ScriptedCore(cfg, spark_facts()))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert any("unknown binding id lanuch" in n.message for n in app._notifications)


@pytest.mark.parametrize("size", [(80, 24), (120, 30)])
async def test_the_bench_key_is_in_the_footer(config, core, size):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        keys = await wait_for(pilot, lambda: {k.action: k for k in app.screen.query("FooterKey")}, what="footer")
        assert "bench" in keys and keys["bench"].key_display == "b", sorted(keys)
        assert keys["bench"].description == ("Bench" if size[0] < 100 else "Benchmark")
