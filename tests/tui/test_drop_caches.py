"""Free memory on unified memory: the preflight finds a node whose page cache holds what the engine
needs, the refusal offers drop-caches, the drop is confirmed with the CLI's text, runs through the
core's drop_caches, says before and after, and the check runs again before the launch."""

from __future__ import annotations

from sparktui.core.memory.free import DROP_SCRIPT, DropPreview
from sparktui.tui.app import SparkApp
from sparktui.tui.forms.launch_form import LaunchForm
from sparktui.tui.screens.confirm import ConfirmScreen

from .conftest import submit_form, wait_for
from .fake_core import dropped
from .samples import PROBES

# A Spark right after receiving the checkpoint: most of its memory is page cache.
AFTER_COPY = (
    "MemTotal:       125514352 kB\nMemFree:         9832112 kB\nMemAvailable:   119883220 kB\n"
    "Buffers:          112640 kB\nCached:        108240512 kB\n"
)
ROOMY = dropped(AFTER_COPY)


async def test_a_preflight_short_of_memory_offers_drop_caches_and_checks_again(config, core):
    core.meminfo = {"spark1": ROOMY, "spark2": AFTER_COPY}
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await submit_form(pilot, app)
        refusal = await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        rows = str(app.launch_pane.preflight_content())
        assert "✗ low memory" in rows and "✓ ok" in rows
        why = next(ln for ln in refusal.preview.lines() if ln.startswith("why: "))
        assert why.startswith("why: spark2: 9.4 GiB free for the GPU") and "would refuse to start" in why
        assert str(refusal.query_one("#alt").label) == "Drop caches on spark2 (d)"
        assert "launch anyway" in str(refusal.query_one("#ok").label).lower()  # still possible
        await pilot.press("d")

        ask = await wait_for(
            pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen is not refusal and app.screen
        )
        assert isinstance(ask.preview, DropPreview) and ask.preview.nodes == ["spark2"]
        body = str(ask.query_one("#confirm-body").render())
        assert "spark2: run `sync; echo 3 > /proc/sys/vm/drop_caches` as root, or through sudo -n" in body
        assert "now 9.4 GiB free, 103.3 GiB page cache" in body
        assert not [c for c in core.calls if c[0] == "run"]  # nothing ran before the answer
        await pilot.press("y")

        await wait_for(pilot, lambda: any(op == "launch" for op, _ in core.calls), what="the launch after the drop")
        assert [c[1] for c in core.calls if c[0] == "run"] == [("spark2", DROP_SCRIPT)]
        assert [op for op, _ in core.calls].count("preflight") == 2  # checked again, and now it passed
        notes = [n.message for n in app._notifications]
        assert any("spark2: page cache dropped, free 9.4 GiB -> 112.1 GiB" in n for n in notes), notes
        assert "✓ ok" in str(app.launch_pane.preflight_content())
        assert "✗" not in str(app.launch_pane.preflight_content())


async def test_the_drop_key_offers_the_plan_checks_shortfall_and_cancel_runs_nothing(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        # the sample Sparks hold 25 GiB of page cache and lack 2 GiB of the default fraction: both short
        assert [m.node for m in app.flow.plan_shortfalls()] == ["spark1", "spark2"]
        await pilot.press("d")
        ask = await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert ask.preview.title == "Drop the page cache on spark1, spark2"
        await pilot.press("n")
        await wait_for(pilot, lambda: not app.running, what="the drop to be called off")
        assert not [c for c in core.calls if c[0] == "run"]

        sample = (PROBES / "meminfo-spark.txt").read_text()
        core.meminfo = {"spark1": sample, "spark2": sample}
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        note = await wait_for(
            pilot,
            lambda: next(
                (n.message for n in app._notifications if "free memory ok on spark1, spark2" in n.message), None
            ),
        )
        assert note.count("page cache dropped") == 2
        # the plan checks run again on the probe taken after the drop
        await wait_for(pilot, lambda: app.flow.plan_shortfalls() == [], what="the plan checks to pass")


async def test_the_launch_forms_plan_check_offers_the_drop_and_checks_again_after_it(config, core):
    sample = (PROBES / "meminfo-spark.txt").read_text()  # what the sample facts were probed from
    core.meminfo = {"spark1": sample, "spark2": sample}
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        await pilot.press("l")
        form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen)
        button = form.query_one("#drop")
        assert button.display and [m.node for m in form.droppable] == ["spark1", "spark2"]
        assert "free memory: spark1" in str(form.query_one("#issues").render())
        await pilot.click("#drop")
        ask = await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert ask.preview.title == "Drop the page cache on spark1, spark2"
        await pilot.press("y")
        # the probe after the drop reaches the open form: its plan check passes and the offer goes
        await wait_for(pilot, lambda: app.screen is form and not button.display, what="the form checked again")
        assert "free memory" not in str(form.query_one("#issues").render())
        assert [c[1][0] for c in core.calls if c[0] == "run"] == ["spark1", "spark2"]
