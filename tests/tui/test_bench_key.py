"""`b`: the benchmark screen shows the client's progress, its rows and, after a pivot, the previous engine's
rows beside; esc while it runs cancels the core's run (which stops the client on the head: the ssh tier's
tests/ssh/test_bench_cli.py shows that part). The rows are read from the real client's result files."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.deployments import changed
from sparktui.core.bench import client, results
from sparktui.tui.app import SparkApp
from sparktui.tui.screens.bench import BenchScreen

from .conftest import screen_text, wait_for

SAMPLES = Path(__file__).resolve().parents[1] / "unit" / "samples" / "bench"


def rows(engine: str) -> list[results.Row]:
    return [
        results.from_client(
            (SAMPLES / f"{engine}-c{c}.json").read_text(),
            f"c{c}",
            concurrency=c,
            deployment="sparks",
            engine=engine,
            image=f"{engine}-img:1",
            plan_id="p",
            mode="native",
            tp=2,
        )
        for c in (1, 8)
    ]


async def ready(pilot, app, core) -> None:
    await wait_for(pilot, lambda: app.inventory_ready)
    core.bus.emit(changed("sparks", "vllm", "native", "ready", "ready"))
    await wait_for(pilot, lambda: app.check_action("bench", ()) is True, what="b enabled once ready")


async def test_b_shows_progress_then_the_rows_with_the_previous_engine_beside(config, core):
    go = asyncio.Event()

    async def bench(workload, on_progress):
        on_progress(client.Progress(concurrency=8, done=3, total=32))
        await go.wait()
        return rows("vllm"), rows("sglang")

    core.bench = bench
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(140, 40)) as pilot:
        assert app.check_action("bench", ()) is None  # nothing serves yet: greyed out
        await ready(pilot, app, core)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, BenchScreen), what="the bench screen")
        await wait_for(pilot, lambda: "concurrency 8: 3/32 requests" in screen_text(app), what="progress")
        go.set()
        await wait_for(pilot, lambda: "before: sglang" in screen_text(app), what="the rows")
        text = screen_text(app)
        assert "now: vllm native TP2" in text and "before: sglang native TP2" in text
        now, before = rows("vllm"), rows("sglang")
        # both tables on the same lines: side by side
        line = next(ln for ln in text.splitlines() if "now: vllm" in ln)
        assert "before: sglang" in line
        for r in now + before:
            assert f"{r.output_tokens_per_s:.1f}" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, BenchScreen), what="closed")


async def test_esc_while_it_runs_cancels_the_run(config, core):
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def bench(workload, on_progress):
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    core.bench = bench
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, core)
        await pilot.press("b")
        await wait_for(pilot, started.is_set, what="the run begun")
        await pilot.press("escape")
        await wait_for(pilot, cancelled.is_set, what="the run cancelled")
        await wait_for(pilot, lambda: not isinstance(app.screen, BenchScreen), what="closed")
        assert any("client on the head was stopped" in n.message for n in app._notifications)


async def test_a_missing_client_is_shown_with_its_fix(config, core):
    from sparktui.core.bench.run import BenchError

    async def bench(workload, on_progress):
        raise BenchError(client.missing_message("spark1", "img:1"), "client missing")

    core.bench = bench
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, core)
        await pilot.press("b")
        await wait_for(pilot, lambda: "no benchmark client on spark1" in screen_text(app), what="the error")
        assert "sparktui sync image vllm --to spark1" in app.screen.error  # shown whole (wrapped)
        assert "sparktui sync image vllm" in " ".join(screen_text(app).replace("█", " ").split())
