"""At 80x24 the essential keys stay in the footer, the status line keeps the endpoint, help fits or scrolls."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.deployments import changed
from sparktui.tui.app import PANES, SparkApp
from sparktui.tui.screens.help import HelpScreen

from .conftest import screen_text, settled_text, wait_for
from .fake_core import ScriptedCore
from .samples import spark_config, spark_facts

ESSENTIAL = ("l Launch", "p Pivot", "s Stop", "f Follow", "? Keys", "^p Palette", "q Quit")
ENDPOINT = "http://192.168.100.10:30000/v1"


def _footer_keys(app) -> list[str]:
    return [f"{k.key_display} {k.description}" for k in app.screen.query("FooterKey")]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_every_footer_key_is_on_screen_on_every_pane(size):
    cfg = spark_config()
    app = SparkApp(cfg, controller=ScriptedCore(cfg, spark_facts()))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        for pane in PANES:
            app.show_pane(pane)
            await wait_for(pilot, lambda: app.screen.query("FooterKey"))
            bottom = (await settled_text(pilot, app)).splitlines()[-1]
            keys = _footer_keys(app)
            assert all(k in bottom for k in keys), (pane, keys, bottom)
            assert all(k in keys for k in ESSENTIAL), (pane, keys)
        if size[0] >= 120:
            assert "t Sync model" in keys and "i Sync image" in keys  # full words where they fit


async def test_the_status_line_keeps_the_endpoint_at_80_columns():
    cfg = replace(spark_config(), cluster="DEMO — simulated cluster")
    core = ScriptedCore(cfg, spark_facts())
    app = SparkApp(cfg, controller=core)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        core.bus.emit(changed("d1", "vllm", "ray", "ready", "serving", ENDPOINT))
        app.running = frozenset({"sync_model"})
        await wait_for(pilot, lambda: app.deploy_state == "ready")
        app._draw_status()
        top = screen_text(app).splitlines()[0]
        assert ENDPOINT in top and "ready" in top and "sync_model" not in top, top


@pytest.mark.parametrize("height", [24, 14])
async def test_help_shows_every_note_whole_or_scrolls_to_it(height, config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(80, height)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        seen = ""
        for _ in range(3):  # the top, then page by page to the end
            screen = await settled_text(pilot, app)
            seen += " " + " ".join(screen.replace("│", " ").split())  # box sides out, wrapped lines joined
            await pilot.press("pagedown")
        assert "Remap a key with keymap: {ID: KEY} in the config." in seen
        for row in app.screen.rows:  # every key's note, whole
            assert " ".join(row[3].split()) in seen, row


async def test_the_hang_box_keeps_the_pivot_advice_at_80x24(config, core):
    """Two ranks hang with long fixes: the way out (the pivot key and where it goes) is what the box shows first."""
    from .conftest import submit_form

    app = SparkApp(config, controller=core)
    async with app.run_test(size=(80, 24)) as pilot:
        await submit_form(pilot, app)
        await wait_for(pilot, lambda: app.deploy_state == "hung", what="hang")
        await wait_for(pilot, lambda: len(app.launch_pane.problems) == 2, what="both ranks' hang")
        app.clear_notifications()  # the toast says it too: the box alone must
        text = await settled_text(pilot, app)
        assert "press p to pivot to vLLM" in " ".join(text.split()), text
        assert "suspected rendezvous hang" in text, text
