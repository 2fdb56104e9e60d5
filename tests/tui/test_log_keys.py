"""Choosing a node's log from the keyboard: n / N walk the log tabs, `node:NAME` in the filter picks nodes."""

from __future__ import annotations

from sparktui.tui.app import SparkApp

from .conftest import wait_for
from .test_flow import launched


async def test_n_walks_the_log_tabs_and_the_filter_picks_a_node(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await launched(pilot, app, core)
        log = app.launch_pane.log
        await wait_for(pilot, lambda: {"spark1", "spark2"} <= {ln.split(" ")[0] for ln in log.shown}, what="logs")
        await pilot.press("n")
        await wait_for(pilot, lambda: log.node == "spark1", what="the first node's tab")
        assert log.shown and all(ln.startswith("spark1") for ln in log.shown)
        await pilot.press("n")
        await wait_for(pilot, lambda: log.node == "spark2", what="the second node's tab")
        await pilot.press("n")
        await wait_for(pilot, lambda: log.node is None, what="back to every node")
        await pilot.press("N")
        await wait_for(pilot, lambda: log.node == "spark2", what="backwards to the last node")
        await pilot.press("N", "N")
        await wait_for(pilot, lambda: log.node is None, what="all again")
        await pilot.press("slash")
        await pilot.press(*"node:spark2")
        await wait_for(
            pilot, lambda: log.shown and all(ln.startswith("spark2") for ln in log.shown), what="the node: filter"
        )
        await pilot.press("enter")
        assert log.filter_text == "node:spark2"


async def test_keys_typed_in_the_burst_of_slash_go_to_the_filter(config, core):
    """`/t` typed fast: the t is the filter's first letter, not the sync key (no pause between the two)."""
    from textual import events
    from textual.widgets import Input

    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="first inventory")
        app.show_pane("pane-launch")
        await wait_for(pilot, lambda: app.check_action("filter", ()) is True, what="the filter key")
        app.post_message(events.Key("slash", "/"))
        app.post_message(events.Key("t", "t"))
        box = app.launch_pane.query_one("#log-filter", Input)
        await wait_for(pilot, lambda: box.value == "t", what="t in the filter")
        assert app.focused is box
        assert not [c for c in core.calls if c[0] == "sync_model"] and "sync_model" not in app.running
        await pilot.press("slash")  # inside the filter, / is text
        await wait_for(pilot, lambda: box.value == "t/", what="/ in the filter")
        assert not [n for n in app._notifications if "not now" in n.message]
