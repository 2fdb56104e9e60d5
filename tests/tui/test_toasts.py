"""Toasts: the same news once, never more than a few at a time, and no replay of old news on reopening."""

from __future__ import annotations

import time

from tests.deployments import changed
from sparktui.core.diagnosis.logevents import Milestone, Problem
from sparktui.tui.app import NARROW_KEEP, SparkApp
from sparktui.tui.toasts import MAX_TOASTS

from .conftest import wait_for
from .fake_core import ScriptedCore
from .samples import spark_config, spark_facts


def _toasts(app) -> list[tuple[str, str]]:
    return [(n.severity, n.message) for n in app._notifications]


async def test_the_same_news_shows_once_and_the_pile_is_bounded(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        app.clear_notifications()
        for _ in range(3):
            app.notify("spark2: link lost (closed)", severity="warning")
        await wait_for(pilot, lambda: _toasts(app) == [("warning", "spark2: link lost (closed)")])
        app.notify("the hang", severity="error")
        for i in range(5):
            app.notify(f"news {i}")
            await pilot.pause()
        toasts = _toasts(app)
        assert len(toasts) == MAX_TOASTS, toasts
        assert ("error", "the hang") in toasts and ("information", "news 4") in toasts  # errors stay longest


class Reopened(ScriptedCore):
    """A deployment that hung before this app opened: the reattach reads its whole log again."""

    async def start(self) -> None:
        await super().start()
        old = time.time() - 3600
        self.bus.emit(Milestone("dist_init_begin", 10, "spark1", old))
        self.bus.emit(Problem("rendezvous_hang", 12, "no output for 92 s", "pivot", "spark1", old + 92))
        self.bus.emit(changed("d1", "sglang", "native", "hung", "distributed init stalled"))


async def test_reopening_does_not_replay_old_news():
    cfg = spark_config()
    core = Reopened(cfg, spark_facts())
    app = SparkApp(cfg, controller=core)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.deploy_state == "hung" and app._settled)
        await wait_for(pilot, lambda: app.launch_pane.problems, what="the problem in the pane")
        # the backlog may still be arriving once the app has settled: old lines are history too
        core.bus.emit(Milestone("dist_init_end", 40, "spark2", time.time() - 3000))
        core.bus.emit(Problem("rendezvous_hang", 13, "no output", "pivot", "spark2", time.time() - 3000))
        await pilot.pause(0.1)
        assert _toasts(app) == []
        # what happens now is news
        core.bus.emit(Milestone("dist_init_end", 41, "spark1", time.time()))
        await wait_for(pilot, lambda: any("spark1: distributed init done" in m for _, m in _toasts(app)))


async def test_the_latest_news_stays_when_older_failures_follow(config, core):
    """After a pivot the endpoint's answer must stay on screen even if the replaced engine's errors arrive."""
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        app.clear_notifications()
        app.notify("old failure 1", severity="error")
        app.notify("old failure 2", severity="error")
        app.notify("qwen answered in 0.1 s")
        app.notify("old failure 3", severity="error")
        await pilot.pause()
        toasts = _toasts(app)
        assert len(toasts) == MAX_TOASTS and ("information", "qwen answered in 0.1 s") in toasts, toasts


async def test_a_narrow_screen_shows_fewer_notices(config, core):
    """At 80 columns a toast spans the bottom: NARROW_KEEP at a time, the newest always among them."""
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        app.clear_notifications()
        app.notify("the hang", severity="error")
        app.notify("launched")
        app.notify("qwen answered in 0.1 s")
        await pilot.pause()
        assert len(_toasts(app)) == NARROW_KEEP == 2
        assert _toasts(app) == [("error", "the hang"), ("information", "qwen answered in 0.1 s")]


async def test_an_operation_does_not_repeat_what_its_transfer_said(config, core):
    from sparktui.tui import messages as M

    app = SparkApp(config, controller=core)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        app.clear_notifications()
        app.notify("model copy to spark2: verified: 7 files, 64.0 MiB")
        app.post_message(M.OperationDone("sync_model", "spark2: verified: 7 files, 64.0 MiB"))
        app.post_message(M.OperationDone("refresh", "2 nodes probed"))
        await wait_for(pilot, lambda: len(_toasts(app)) == 2, what="the refresh's word")
        assert _toasts(app) == [
            ("information", "model copy to spark2: verified: 7 files, 64.0 MiB"),
            ("information", "2 nodes probed"),
        ]
