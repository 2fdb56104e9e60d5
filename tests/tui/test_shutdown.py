"""Closing the app while the core still reports: the events left in the queue find no pane and are dropped."""

from __future__ import annotations

import asyncio

from sparktui.core.state.events import TransferProgress
from sparktui.tui import messages as M
from sparktui.tui.app import SparkApp
from sparktui.tui.panes.transfers import TransfersPane

from .conftest import wait_for
from .fake_core import ScriptedCore
from .samples import spark_config, spark_facts


async def test_events_that_arrive_while_the_app_closes_are_dropped_without_an_error():
    cfg = spark_config()
    app = SparkApp(cfg, controller=ScriptedCore(cfg, spark_facts()))
    closed = asyncio.Event()

    async def report() -> None:  # a copy still running on the nodes, reporting until the app is gone
        for i in range(20000):
            if closed.is_set():
                return
            app.post_message(
                M.CoreEvent(
                    TransferProgress(id="t1", kind="model", source="spark1", dest="spark2", state="running", bytes=i)
                )
            )
            await asyncio.sleep(0)

    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        reporter = asyncio.create_task(report())
        pane = app.query_one(TransfersPane)
        await wait_for(pilot, lambda: pane.transfers, what="the transfer shown")
    # leaving the block shuts the app down while the reports keep coming; a failed handler re-raises here
    closed.set()
    await reporter
    assert not app.is_running
