"""The launch pane's preflight rows say what each node's check waits for: its container to start, or the
rendezvous (a large image can take minutes to start; that is not the network's fault)."""

from __future__ import annotations

from sparktui.core.state.events import PreflightStage, PreflightStarted
from sparktui.tui.app import SparkApp

from .conftest import wait_for


def _row(text: str, node: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(node))


async def test_the_rows_tell_a_container_starting_from_a_rendezvous(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="first inventory")
        core.bus.emit(PreflightStarted("sparks", ["spark1", "spark2"], "192.168.100.0/24", "192.168.100.10", "img"))
        core.bus.emit(PreflightStage("sparks", "spark1", "starting"))
        core.bus.emit(PreflightStage("sparks", "spark2", "starting"))
        core.bus.emit(PreflightStage("sparks", "spark1", "rendezvous"))

        def rows() -> str:
            return str(app.launch_pane.preflight_content() or "")

        await wait_for(pilot, lambda: "rendezvous…" in rows(), what="spark1 in its rendezvous")
        assert _row(rows(), "spark1").endswith("rendezvous…")
        assert _row(rows(), "spark2").endswith("starting the check container…")
