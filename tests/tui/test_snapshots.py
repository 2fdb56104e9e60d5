"""Each pane as text at fixed sizes, compared with tests/tui/snapshots/.

After a deliberate change of layout, rewrite them with
`pytest tests/tui/test_snapshots.py --update-snapshots` (or SPARKTUI_UPDATE_SNAPSHOTS=1) and review
the diff like code.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

from sparktui.tui.app import SparkApp
from sparktui.tui.forms.launch_form import LaunchForm

from .conftest import settled_text, wait_for
from .fake_core import ScriptedCore
from .samples import spark_config, spark_facts

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
SIZES = [(80, 24), (120, 40)]
VIEWS = ["nodes", "form", "launch", "transfers", "journal"]


def normalise(text: str) -> str:
    """Wall-clock times and sub-second durations change run to run; nothing else may."""
    text = re.sub(r"\b\d\d:\d\d:\d\d\b(?!\])", "hh:mm:ss", text)  # journal times, not the recorded log's
    text = re.sub(r"\b\d+ms\b", "Nms", text)
    text = re.sub(r"sparktui\.plan=[0-9a-f]{12}", "sparktui.plan=<id>", text)  # a hash of the whole plan
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


async def _render(view: str, size: tuple[int, int]) -> str:
    cfg = spark_config()
    core = ScriptedCore(cfg, spark_facts())
    app = SparkApp(cfg, controller=core)
    app.animation_level = "none"  # tab underlines must not be caught mid-slide
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="inventory")
        if view == "form":
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm), what="form")
        elif view in ("launch", "transfers", "journal"):
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm), what="form")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.deploy_state == "hung", what="hang")
            app.launch_pane.log.flush_now()
            if view != "launch":
                await pilot.press("t")
                await wait_for(pilot, lambda: "sync_model" not in app.running, what="sync")
                app.show_pane(f"pane-{view}")
        await wait_for(
            pilot,
            lambda: app.screen.query("FooterKey") if not isinstance(app.screen, LaunchForm) else True,
            what="footer keys",
        )
        # a pane that takes the focus redraws the footer once more: the screen settled with it drawn
        for _ in range(20):  # bounded: a footer never drawn shows in the diff
            text = await settled_text(pilot, app)
            if isinstance(app.screen, LaunchForm) or text.rstrip("\n").splitlines()[-1].strip():
                break
        return normalise(text)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", VIEWS)
async def test_pane_snapshot(view, size, request):
    text = await _render(view, size)
    path = SNAPSHOTS / f"{view}-{size[0]}x{size[1]}.txt"
    update = (
        request.config.getoption("--update-snapshots", default=False)
        or os.environ.get("SPARKTUI_UPDATE_SNAPSHOTS") == "1"
    )
    if update:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no snapshot {path.name}: run with --update-snapshots and review it"
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "snapshot", "now"))
        pytest.fail(f"{path.name} differs (rerun with --update-snapshots if intended):\n{diff}")
