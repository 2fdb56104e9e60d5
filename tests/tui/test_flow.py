"""The whole path through the app against the scripted core: form -> launch -> logs -> hang -> pivot -> ready."""
from __future__ import annotations

from textual.widgets import Select

from sparktui.tui.app import SparkApp
from sparktui.tui.forms.launch_form import LaunchForm
from sparktui.tui.screens.confirm import ConfirmScreen

from .conftest import screen_text, wait_for


async def test_launch_hang_pivot_ready(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="first inventory")
        await pilot.press("l")
        form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen, what="launch form")
        # The form offers only what can work on two one-GPU nodes, and the fabric before management.
        assert [v for _, v in form.query_one("#parallel", Select)._options] == ["2:1", "1:2"]
        rdv = [v for _, v in form.query_one("#rendezvous", Select)._options]
        assert rdv[0] == "192.168.100.0/24" and rdv[-1] == "192.168.1.0/24"
        assert form.plan is not None and form.plan.ok, form.plan.errors
        preview = str(form.query_one("#preview").content)
        assert "SGLANG_HOST_IP=192.168.100.10" in preview and "SGLANG_HOST_IP=192.168.100.11" in preview
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: core.calls and core.calls[0][0] == "launch", what="launch call")
        launched = core.calls[0][1]
        assert (launched.engine, launched.tp, launched.subnet) == ("sglang", 2, "192.168.100.0/24")

        # logs stream in, then the silence turns into a hang with its fix and the pivot key
        await wait_for(pilot, lambda: app.deploy_state == "hung", what="hang")
        log = app.launch_pane.log
        log.flush_now()
        assert any("CustomAllreduce is disabled" in line for line in log.shown)
        assert {"spark1", "spark2"} <= {line.split(" ")[0] for line in log.shown}
        notes = [n.message for n in app._notifications]
        hang = [m for m in notes if m.startswith("Distributed init hung")]
        assert hang and "SGLANG_HOST_IP" in hang[0] and "Press p to pivot" in hang[0]
        assert "rendezvous hang" in screen_text(app)

        # pivot asks first, naming what stops and starts where
        await pilot.press("p")
        confirm = await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen, what="confirm")
        body = "\n".join(confirm.preview.lines())
        assert "stop  sparktui-sparks-sglang-0 on spark1" in body
        assert "on spark2" in body and "vllm ray" in body
        await pilot.press("y")
        await wait_for(pilot, lambda: app.deploy_state == "ready", what="ready after pivot")
        pivot = next(plan for op, plan in core.calls if op == "pivot")
        assert (pivot.engine, pivot.mode) == ("vllm", "ray")
        assert app.endpoint == "http://192.168.100.10:8000/v1"
        assert not app.launch_pane.problems  # a new start clears the old hang
        text = screen_text(app)
        assert "READY" in text
