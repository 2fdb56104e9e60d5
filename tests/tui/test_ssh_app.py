"""The app on the real controller, over SSH to in-process servers on 127.0.0.1 (shimmed GPU tools)."""

from __future__ import annotations

import asyncio

from textual.widgets import Select

from sparktui.core.state.journal import Journal
from sparktui.tui.app import SparkApp
from sparktui.tui.controller import Controller
from sparktui.tui.forms.launch_form import LaunchForm

from .conftest import wait_for
from .sshnodes import start_nodes, stop_nodes


async def test_nodes_probed_over_ssh_feed_panes_and_form(tmp_path):
    cfg, servers = await start_nodes(tmp_path)
    controller = Controller(cfg, journal=Journal(), poll_interval=3600)
    app = SparkApp(cfg, controller=controller)
    try:
        async with app.run_test(size=(100, 32)) as pilot:
            await wait_for(pilot, lambda: app.inventory_ready, timeout=30, what="inventory over SSH")
            card = app.nodes_pane.card("spark1")
            text = str(card.content)
            assert "● spark1" in text and "NVIDIA GB10" in text
            assert "◆ fabric" in next(ln for ln in text.splitlines() if "enp1s0f1np1" in ln)
            assert all(app.links[n].connected for n in ("spark1", "spark2"))
            # every remote command shows in the journal pane, with its exit status
            journal = app.query_one("#journal")
            await wait_for(pilot, lambda: journal.row_count >= 2, what="journal rows")
            rows = [journal.get_row_at(i) for i in range(journal.row_count)]
            assert {r[1] for r in rows} == {"spark1", "spark2"}
            assert all(r[2].plain == "✓ 0" for r in rows)
            # the form reads the probed facts: one GB10 per node, the fabric first
            await pilot.press("l")
            form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen)
            assert [v for _, v in form.query_one("#parallel", Select)._options] == ["2:1", "1:2"]
            assert form.values.rendezvous == "auto" and form.plan.subnet == "192.168.100.0/24"
            assert form.plan is not None and form.plan.nodes[1].ip == "192.168.100.11"
            await pilot.press("escape")
            # a node that goes away turns its card red
            stop_nodes(servers[1:])
            await wait_for(pilot, lambda: app.links["spark2"].connected is False, timeout=15, what="link down")
            assert "✗ spark2" in str(app.nodes_pane.card("spark2").content)
            assert app.links["spark1"].connected
    finally:
        await asyncio.wait_for(controller.close(), 10)
        stop_nodes(servers)
