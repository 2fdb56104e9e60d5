"""Write the README's screenshots (SVG) from the real app, driven by the recorded story.

    python3 tools/screenshots.py            # -> docs/screenshots/*.svg

The app runs headless at 120x36 with the scripted core the TUI tests use (engine output recorded from
the simulator, node facts parsed from real probe samples), so the pictures are reproducible.
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparktui.tui.app import SparkApp  # noqa: E402
from sparktui.tui.forms.launch_form import LaunchForm  # noqa: E402
from sparktui.tui.screens.confirm import ConfirmScreen  # noqa: E402
from tests.tui.conftest import wait_for  # noqa: E402
from tests.tui.fake_core import ScriptedCore  # noqa: E402
from tests.tui.samples import spark_config, spark_facts  # noqa: E402

OUT = ROOT / "docs" / "screenshots"


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = spark_config()
    app = SparkApp(cfg, controller=ScriptedCore(cfg, spark_facts()))
    app.animation_level = "none"

    def shot(name: str) -> None:
        app.save_screenshot(filename=f"{name}.svg", path=str(OUT))
        print(OUT / f"{name}.svg")

    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="inventory")
        await pilot.pause(0.2)
        shot("nodes")
        await pilot.press("t")
        await wait_for(pilot, lambda: "sync_model" not in app.running, what="sync")
        app.show_pane("pane-transfers")
        await pilot.pause(0.2)
        shot("transfers")
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm), what="form")
        await pilot.pause(0.3)
        shot("launch-form")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.deploy_state == "hung", what="hang")
        app.launch_pane.log.flush_now()
        await pilot.pause(0.3)
        shot("hang")
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
        await pilot.pause(0.2)
        shot("pivot-confirm")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.deploy_state == "ready", what="ready", timeout=30)
        app.launch_pane.log.flush_now()
        await pilot.pause(0.3)
        shot("ready")


if __name__ == "__main__":
    asyncio.run(main())
