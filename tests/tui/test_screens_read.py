"""What a person reads at 80x24 and 160x48: notices that leave the log and dialogs alone, both URLs of
a ready engine labelled, a journal entry whole on Enter. The scripted core, read as screen text."""

from __future__ import annotations

import pytest

from tests.deployments import changed
from sparktui.core.state.events import EndpointChecked
from sparktui.tui.app import NARROW_TIMEOUT, SparkApp
from sparktui.tui.panes.journal import JournalPane
from sparktui.tui.screens.entry import EntryScreen
from sparktui.tui.screens.help import HelpScreen

from .conftest import screen_text, wait_for

SIZES = [(80, 24), (160, 48)]
NODE_URL = "http://10.0.0.11:30000/v1"
LOCAL_URL = "http://127.0.0.1:41234/v1"


@pytest.mark.parametrize("size", SIZES)
async def test_help_opened_over_a_notice_shows_no_notice(config, core, size):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=size, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        app.notify("Distributed init hung on spark2. Press p to pivot.", title="Hang", severity="error", timeout=30)
        await wait_for(pilot, lambda: "Press p to pivot" in screen_text(app), what="the notice")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
        await pilot.pause()
        text = screen_text(app)
        assert "Keys (" in text and "Press p to pivot" not in text, text


async def test_a_narrow_screen_keeps_notices_brief_and_off_the_log(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        app.clear_notifications()
        app.notify("the engine process died", title="engine died", severity="error", timeout=30)
        [n] = list(app._notifications)
        assert n.timeout <= NARROW_TIMEOUT
        await wait_for(pilot, lambda: "the engine process died" in screen_text(app), what="the notice")
        rows = [ln for ln in screen_text(app).splitlines() if "▌" in ln]
        # the notice spans the bottom rows, whole width, instead of the right half of every row
        assert rows and all(ln.index("▌") <= 1 for ln in rows), "\n".join(rows)
        assert len(rows) <= 4, "\n".join(rows)  # a few rows over the problems box, not the whole log


async def test_a_wide_screen_keeps_notices_as_asked(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        app.notify("the engine process died", title="engine died", severity="error", timeout=30)
        assert any(n.timeout == 30 for n in app._notifications)


@pytest.mark.parametrize("size", SIZES)
async def test_ready_says_which_url_is_which(config, core, size):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=size, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        app._settled = True
        core.bus.emit(EndpointChecked("d1", NODE_URL, LOCAL_URL, "qwen", 0.2, 16, 80.0))
        core.bus.emit(changed("d1", "vllm", "ray", "ready", "qwen answered in 0.20 s", NODE_URL))
        await wait_for(pilot, lambda: app.deploy_state == "ready" and app.local_endpoint == LOCAL_URL)
        app.show_pane("pane-launch")
        await pilot.pause()
        text = screen_text(app)
        status = text.splitlines()[0]
        assert f"on nodes {NODE_URL}" in status, status
        if size[0] >= 120:
            assert f"local {LOCAL_URL}" in status, status
        flat = " ".join(text.split())
        assert f"local {LOCAL_URL} (SSH forward from this machine)" in flat, text  # the launch pane, any width
        said = [n.message for n in app._notifications]
        assert any(LOCAL_URL in m for m in said), said  # the newest notice names the forward
        for m in said:  # and every URL in a notice says which one it is
            assert LOCAL_URL not in m or f"SSH forward {LOCAL_URL}" in m or f"{LOCAL_URL} (SSH forward" in m, m
            assert NODE_URL not in m or f"on the nodes {NODE_URL}" in m, m


@pytest.mark.parametrize("size", SIZES)
async def test_enter_on_a_journal_row_shows_the_whole_entry(config, core, size):
    app = SparkApp(config, controller=core)
    long_command = (
        "docker run -d --name sparktui-qwen-vllm-0 --label sparktui.deployment=qwen "
        + " ".join(f"-e VAR_{i}=value-{i}" for i in range(30))
        + " nvcr.io/nvidia/vllm:26.10-py3 THE-END"
    )
    async with app.run_test(size=size, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        e = core.journal.start("spark1", long_command)
        core.journal.finish(e, 125, "docker: Error response from daemon: [masked] conflict")
        pane = app.query_one(JournalPane)
        await wait_for(pilot, lambda: pane.row_count and e in pane._entries.values(), what="the row")
        app.show_pane("pane-journal")
        await pilot.pause()
        assert "THE-END" not in screen_text(app)  # the row is cut to the pane
        pane.move_cursor(row=pane.row_count - 1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EntryScreen), what="the entry")
        await pilot.pause()
        flat = "".join(screen_text(app).replace("│", "").split())
        assert "".join(long_command.split()) in flat  # every word of it, wrapped but whole
        assert "✗125" in flat and "conflict" in flat and "[masked]" in flat
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, EntryScreen), what="the entry closed")
