"""The whole path through the app against the scripted core: form -> launch -> logs -> hang -> pivot -> ready."""

from __future__ import annotations


from textual.widgets import Select

from sparktui.tui.app import SparkApp
from sparktui.tui.forms.launch_form import LaunchForm
from sparktui.tui.screens.confirm import ConfirmScreen

from .conftest import screen_text, submit_form, wait_for


async def test_launch_hang_pivot_ready(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="first inventory")
        await pilot.press("l")
        form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen, what="launch form")
        # The form offers only what can work on two one-GPU nodes, and the fabric before management.
        assert [v for _, v in form.query_one("#parallel", Select)._options] == ["2:1", "1:2"]
        rdv = [v for _, v in form.query_one("#rendezvous", Select)._options]
        assert rdv[:2] == ["auto", "192.168.100.0/24"] and rdv[-1] == "192.168.1.0/24"  # auto: the fabric
        assert form.plan is not None and form.plan.ok, form.plan.errors
        preview = str(form.query_one("#preview").content)
        assert "SGLANG_HOST_IP=192.168.100.10" in preview and "SGLANG_HOST_IP=192.168.100.11" in preview
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: [c for c in core.calls if c[0] == "launch"], what="launch call")
        launched = next(plan for op, plan in core.calls if op == "launch")
        # the preflight ran first, on the plan that launched, as a row per node in the launch pane
        ops = [op for op, _ in core.calls]
        assert ops.index("preflight") < ops.index("launch")
        assert next(plan for op, plan in core.calls if op == "preflight") is launched
        rows = str(app.launch_pane.preflight_content())
        assert "spark1" in rows and "spark2" in rows and rows.count("✓ ok") == 2 and "1.25 GB/s" in rows
        assert (launched.engine, launched.tp, launched.subnet) == ("sglang", 2, "192.168.100.0/24")
        # each card tells the launched plan's bootstrap interface from its data path
        card = str(app.nodes_pane.card("spark2").content)
        assert f"PATHS bootstrap {launched.nodes[1].iface}, data" in card, card

        # logs stream in, then the silence turns into a hang with its fix and the pivot key
        await wait_for(pilot, lambda: app.deploy_state == "hung", what="hang")
        log = app.launch_pane.log
        log.flush_now()
        assert any("CustomAllreduce is disabled" in line for line in log.shown)
        assert {"spark1", "spark2"} <= {line.split(" ")[0] for line in log.shown}
        notes = [n.message for n in app._notifications]
        hang = [m for m in notes if m.startswith("Distributed init hung")]
        assert len(hang) == 1, notes  # both ranks hang; one notice says so
        assert "SGLANG_HOST_IP" in hang[0] and "Press p to pivot" in hang[0]
        assert {p.node for p in app.launch_pane.problems.values()} == {"spark1", "spark2"}
        assert "rendezvous hang" in screen_text(app)

        # pivot asks first, naming what stops and starts where
        await pilot.press("p")
        # (pushed is not yet composed: wait for its buttons too)
        confirm = await wait_for(
            pilot,
            lambda: isinstance(app.screen, ConfirmScreen) and app.screen.query("#ok") and app.screen,
            what="confirm",
        )
        lines = confirm.preview.lines()
        spark1 = lines[lines.index("spark1:") + 1 : lines.index("spark2:")]
        assert spark1[0] == "  stop  sparktui-sparks-sglang-0 (running)"
        assert spark1[1].startswith("  start sparktui-sparks-vllm-0 (vllm ray head")
        assert any(ln.startswith("  start sparktui-sparks-vllm-1 (vllm ray worker") for ln in lines)
        assert "Pivot" in str(confirm.query_one("#ok").label)
        await pilot.press("y")
        await wait_for(pilot, lambda: app.deploy_state == "ready", what="ready after pivot")
        pivot = next(plan for op, plan in core.calls if op == "pivot")
        assert (pivot.engine, pivot.mode) == ("vllm", "ray")
        assert app.endpoint == "http://192.168.100.10:8000/v1"
        assert not app.launch_pane.problems  # a new start clears the old hang
        text = screen_text(app)
        assert "READY" in text


async def launched(pilot, app, core):
    await wait_for(pilot, lambda: app.inventory_ready, what="first inventory")
    await pilot.press("l")
    await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm), what="launch form")
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: app.deploy_state == "hung", what="hang")


async def test_stop_asks_and_cancel_changes_nothing(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await launched(pilot, app, core)
        await pilot.press("s")
        confirm = await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert confirm.preview.lines() == [
            "spark1:",
            "  stop  sparktui-sparks-sglang-0 (running)",
            "spark2:",
            "  stop  sparktui-sparks-sglang-1 (running)",
        ]
        assert app.focused.id == "cancel"  # Enter on a dangerous dialog is the safe answer
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert ("stop", None) not in core.calls and app.deploy_state == "hung"
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: app.deploy_state == "stopped", what="stopped")
        assert ("stop", None) in core.calls
        await pilot.pause()
        assert app.check_action("stop", ()) is None  # nothing left to stop: greyed out


async def test_redeploy_runs_the_same_engine_again(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await launched(pilot, app, core)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: any(op == "redeploy" for op, _ in core.calls), what="redeploy")
        await wait_for(pilot, lambda: app.deploy_state == "hung", what="hung again (same engine)")
        again = next(p for op, p in core.calls if op == "redeploy")
        assert again.engine == "sglang" and again.tp == 2


async def test_an_operation_that_fails_is_a_notification_not_a_crash(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        assert await app.run_action("pivot") is False  # greyed out: the key does nothing
        app.action_pivot()  # called anyway, the failure is shown, not raised
        await wait_for(
            pilot, lambda: any("launch it first" in n.message for n in app._notifications), what="failure notification"
        )
        assert not isinstance(app.screen, ConfirmScreen) and app.is_running


async def test_running_containers_of_another_launch_are_replaced_only_after_asking(config):
    from .fake_core import ScriptedCore
    from .samples import spark_facts

    class Busy(ScriptedCore):
        async def prepare(self, op, choices=None):
            p = await super().prepare(op, choices)
            if p.op.value == "launch":  # what the core says when another plan of this deployment runs
                p.replaces = True
                p.preview.stops = [("spark1", "sparktui-sparks-vllm-0 (vllm, running)")]
            return p

    core = Busy(config, spark_facts())
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await submit_form(pilot, app)
        confirm = await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert "  stop  sparktui-sparks-vllm-0 (vllm, running)" in confirm.preview.lines()
        assert not any(op == "launch" for op, _ in core.calls)
        await pilot.press("y")
        await wait_for(pilot, lambda: any(op == "launch" for op, _ in core.calls), what="launch with replace")


async def test_a_failed_preflight_refuses_and_launches_only_when_told_to(config, core):
    core.fail_preflight = "spark2"
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await submit_form(pilot, app)
        confirm = await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert "anyway" in str(confirm.query_one("#ok").label)
        why = next(ln for ln in confirm.preview.lines() if ln.startswith("why: "))
        assert "192.168.100.10:29500" in why and "spark2" in why
        rows = str(app.launch_pane.preflight_content())
        assert "✗ unreachable" in rows and "✓ ok" in rows and "fix: " in rows
        await pilot.press("n")  # refused: nothing starts
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await wait_for(pilot, lambda: not app.running, what="the flow to end")
        assert not any(op == "launch" for op, _ in core.calls)
        assert app.launch_pane.state == "refused"
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")  # launch anyway
        await wait_for(pilot, lambda: any(op == "launch" for op, _ in core.calls), what="launch anyway")


async def test_plan_errors_from_the_core_refuse_before_any_check(config, core):
    from sparktui.tui.forms.launch_form import LaunchForm as Form

    app = SparkApp(config, controller=core)

    async def refused(op, choices=None):
        p = await type(core).prepare(core, op, choices)
        p.errors.append("spark1: port 30000 (HTTP port) is taken by python3 (pid 7)")
        return p

    core.prepare = refused
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, Form))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.launch_pane.state == "refused", what="refused")
        assert any("port 30000" in n.message for n in app._notifications)
        assert [op for op, _ in core.calls] == ["prepare"]  # no preflight, no launch


async def test_sync_model_fills_the_transfers_pane(config, core):
    core.hold_sync = True
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("t")
        pane = app.query_one("#transfers")
        await wait_for(pilot, lambda: "model:spark2" in pane.transfers, what="first progress")
        await wait_for(pilot, lambda: pane.transfers["model:spark2"].percent == 50, what="50 %")
        assert app._active_pane() == "pane-transfers"
        assert app.check_action("sync_model", ()) is None  # one sync at a time
        assert "50.0%" in screen_text(app) and "ETA" in screen_text(app)
        core.release.set()
        await wait_for(pilot, lambda: pane.transfers["model:spark2"].state == "done", what="done")
        await wait_for(pilot, lambda: app.check_action("sync_model", ()) is True)
        await wait_for(pilot, lambda: "verified: 57 files" in screen_text(app), what="the verify line drawn")


async def test_sync_model_asks_first_when_an_image_cannot_load_the_model(config, core):
    """`t` with the stock SGLang image and a Qwen3.5: the dialog says why before anything is copied; n copies
    nothing, y copies anyway."""
    core.futile = [
        "lmsysorg/sglang:spark cannot load qwen3_5_moe (Qwen3_5MoeForConditionalGeneration): SGLang "
        "0.5.3.post3 in lmsysorg/sglang:spark has no Qwen3_5MoeForConditionalGeneration in its model "
        "registry. Copying the model is for nothing with sglang until then"
    ]
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("t")
        confirm = await wait_for(
            pilot,
            lambda: isinstance(app.screen, ConfirmScreen) and app.screen.query("#ok") and app.screen,
            what="the question",
        )
        assert "cannot load this model" in confirm.preview.title and core.futile[0] in confirm.preview.lines()
        assert "Copy anyway" in str(confirm.query_one("#ok").label)
        await pilot.press("n")
        await wait_for(pilot, lambda: "sync_model" not in app.running, what="the sync given up")
        assert not [c for c in core.calls if c[0] == "sync_model"]
        await pilot.press("t")
        await wait_for(
            pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.query("#ok"), what="the question again"
        )
        await pilot.press("y")
        await wait_for(pilot, lambda: ("sync_model", None) in core.calls, what="the copy, anyway")


async def test_transfer_bars_follow_the_terminals_width(config, core):
    """A bar is as wide as the pane: drawn again when the terminal is resized."""
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("t")
        pane = app.query_one("#transfers")
        await wait_for(
            pilot,
            lambda: "model:spark2" in pane.transfers and pane.transfers["model:spark2"].state == "done",
            what="the copy done",
        )

        def bar_row() -> str:
            return next(ln for ln in screen_text(app).splitlines() if "spark1→spark2" in ln)

        narrow = len(
            await wait_for(
                pilot, lambda: bar_row().rstrip() if bar_row().rstrip().endswith("—") else "", what="the done row drawn"
            )
        )
        assert 90 <= narrow < 100  # the pane's width, less its margins
        await pilot.resize_terminal(140, 32)
        await wait_for(
            pilot, lambda: len(bar_row().rstrip()) == narrow + 40, what="the bar row redrawn 40 columns wider"
        )


async def test_filter_and_follow_keys_on_the_launch_pane(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await launched(pilot, app, core)
        log = app.launch_pane.log
        await pilot.press("slash")
        await pilot.press(*"CustomAllreduce")
        await wait_for(pilot, lambda: len(log.shown) == 2, what="filtered view")
        assert all("CustomAllreduce" in ln for ln in log.shown)
        await pilot.press("enter")
        await pilot.press("f")
        assert not log.following
        await pilot.press("f")
        assert log.following
        # a click on a node's tab shows only that node
        await pilot.click("#log-spark2")
        await wait_for(pilot, lambda: log.node == "spark2", what="node tab")
        assert all(ln.startswith("spark2") for ln in log.shown)


async def test_odd_node_and_cluster_names_render_as_written():
    from sparktui.core.config.config import Config, ModelConfig, NodeConfig

    from .fake_core import ScriptedCore
    from .samples import spark_facts

    facts = spark_facts()
    facts = {"gpu.1": facts["spark1"], "gpu_1": facts["spark2"]}
    for name, f in facts.items():
        f.name = name
    cfg = Config(
        cluster="[b]lab[/b] cluster",
        nodes=[NodeConfig("gpu.1", "10.0.0.1", role="head"), NodeConfig("gpu_1", "10.0.0.2")],
        model=ModelConfig("m", "/models/Qwen3.5-122B-A10B-FP8"),
    )
    app = SparkApp(cfg, controller=ScriptedCore(cfg, facts))
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        text = screen_text(app)
        assert "[b]lab[/b] cluster" in text  # not taken as markup
        assert "● gpu.1" in text and "● gpu_1" in text
        app.show_pane("pane-launch")
        await pilot.pause()
        app.launch_pane.add_lines("gpu.1", ["from the dotted node"])
        app.launch_pane.add_lines("gpu_1", ["from the other one"])
        tab = next(t for t in app.query("Tab") if str(t.label) == "gpu.1")
        await pilot.click(f"#{tab.id}")
        log = app.launch_pane.log
        await wait_for(pilot, lambda: log.node == "gpu.1", what="the dotted node's tab")
        assert [ln.split(" │ ")[1] for ln in log.shown] == ["from the dotted node"]


async def test_an_incomplete_model_copy_is_named_on_the_card_and_the_form_will_not_launch_it(config):
    from .fake_core import ScriptedCore
    from .samples import spark_facts

    facts = spark_facts()
    m = facts["spark2"].model
    m.present, m.incomplete = False, "copy model-spark2-1 from spark1 started 2026-12-01 10:00:00 UTC"
    core = ScriptedCore(config, facts)
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        assert "model incomplete" in screen_text(app)
        await pilot.press("l")
        form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen, what="launch form")
        assert form.plan is not None and not form.plan.ok
        assert any(e.startswith("spark2: model incomplete") for e in form.plan.errors), form.plan.errors
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not any(op == "launch" for op, _ in core.calls)
        assert "spark2: model incomplete" in screen_text(app)


async def test_the_forms_check_runs_the_preflight_on_its_choices_and_launches_nothing(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("l")
        form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen, what="form")
        await pilot.press("ctrl+k")
        await wait_for(
            pilot,
            lambda: "every node met the head" in str(form.query_one("#check-result").content),
            what="the check's verdict in the form",
        )
        shown = str(form.query_one("#check-result").content)
        assert shown.count("✓ ok") == 2 and "spark1" in shown and "spark2" in shown
        checked = next(plan for op, plan in core.calls if op == "preflight")
        assert checked.plan_id == form.plan.plan_id  # the form's own choices were checked
        assert isinstance(app.screen, LaunchForm) and not any(op == "launch" for op, _ in core.calls)


async def test_a_busy_deployment_shows_the_lock_holder_and_is_broken_only_when_told(config, core):
    from sparktui.core.deploy.lock import Holder, LockHeld

    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await launched(pilot, app, core)
        holder, real, asked = Holder("laptop", "ann", 4242, "launch", "t0k", 0, 75), core.run, []

        async def run(prepared, force=False, breaking=None):  # another sparktui holds the lock
            asked.append(breaking)
            if breaking is None:
                raise LockHeld(prepared.deployment, holder, "spark1:~/.local/state/sparktui/locks/sparks.lock")
            return await real(prepared, force)

        core.run = run
        for answer in ("enter", "y"):  # Enter is Cancel: the lock stays; then y breaks it
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="stop's confirmation")
            await pilot.press("y")
            busy = await wait_for(
                pilot,
                lambda: isinstance(app.screen, ConfirmScreen) and "busy" in app.screen.preview.title and app.screen,
                what="the lock's holder",
            )
            assert "held by: launch by ann@laptop (pid 4242), 75 s ago" in busy.preview.notes
            await pilot.press(answer)
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
            if answer == "enter":
                assert asked == [None] and ("stop", None) not in core.calls
        await wait_for(pilot, lambda: app.deploy_state == "stopped", what="stopped")
        assert asked == [None, None, holder]


async def test_stopped_containers_an_earlier_launch_left_are_removed_only_when_agreed(config, core):
    core.stale = {"spark2": ["sparktui-old-sglang-1"]}
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await submit_form(pilot, app)
        confirm = await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert "stale containers" in confirm.preview.title and "Remove them" in str(confirm.query_one("#ok").label)
        assert "sparktui-old-sglang-1 (stopped)" in "\n".join(confirm.preview.lines())
        await pilot.press("n")  # kept: the launch goes on all the same
        await wait_for(pilot, lambda: any(op == "launch" for op, _ in core.calls), what="the launch")
        assert not any(op == "remove_stale" for op, _ in core.calls)
        await wait_for(pilot, lambda: not app.running, what="the flow to end")
    core.calls.clear()
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await submit_form(pilot, app)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: any(op == "launch" for op, _ in core.calls), what="the launch")
        assert ("remove_stale", {"spark2": ["sparktui-old-sglang-1"]}) in core.calls
        ops = [op for op, _ in core.calls]
        assert ops.index("remove_stale") < ops.index("launch")
