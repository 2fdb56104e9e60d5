"""The launch pane's serving block: metrics from READY on, with sparklines; `wedged` in the state badge."""

from __future__ import annotations

from tests.deployments import changed
from sparktui.core.state.events import ServingStats
from sparktui.tui.app import SparkApp
from sparktui.tui.present.serving import serving_block, sparkline

from .conftest import wait_for

STATS = {
    "engine": "vllm",
    "running": 3,
    "waiting": 1,
    "kv_cache_usage": 0.42,
    "generation_tokens_per_s": 123.4,
    "prompt_tokens_per_s": 800.0,
    "ttft_p50_s": 0.05,
    "ttft_p90_s": 0.2,
    "itl_p50_s": 0.02,
    "itl_p90_s": 0.03,
    "missing": [],
    "scrapes": 3,
    "parse_errors": 0,
    "last_parse_error": None,
}


def test_sparklines_scale_to_the_largest_value_or_a_fixed_top():
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([0.5, 1.0], top=1.0) == "▅█"
    assert sparkline([0, 0]) == "▁▁" and sparkline([]) == ""
    assert len(sparkline(list(range(100)))) == 30  # only the most recent


def test_the_block_names_every_number_and_what_is_missing_or_unreadable():
    text = serving_block(
        {**STATS, "missing": ["itl"], "parse_errors": 2, "last_parse_error": "ValueError: x"},
        {"generation_tokens": [10, 120], "kv_cache_usage": [0.42]},
    ).plain
    for words in (
        "123.4 tok/s",
        "prompt 800.0 tok/s",
        "3 running · 1 waiting",
        "KV 42 %",
        "p50 50 ms p90 200 ms",
        "ITL p50 20 ms",
        "not exported: itl",
        "2 unreadable scrape(s): ValueError: x",
    ):
        assert words in text, words
    none = serving_block({"scrapes": 0}, {}, "sglang on spark1 has no /metrics (HTTP 404): add --enable-metrics").plain
    assert none.startswith("serving no metrics: sglang on spark1 has no /metrics")


async def test_the_launch_pane_shows_metrics_once_they_come_and_wedged_in_the_badge(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        pane = app.launch_pane
        assert not pane.has_class("-serving")
        core.bus.emit(ServingStats("sparks", STATS, {"generation_tokens": [10.0, 60.0, 120.0]}))
        await wait_for(pilot, lambda: pane.has_class("-serving"), what="the serving block")
        shown = str(pane.query_one("#serving").render())
        assert "123.4 tok/s" in shown and "▂▅█" in shown  # 10, 60, 120 of 120
        core.bus.emit(changed("sparks", "vllm", "native", "wedged", "wedged: 3 request(s) running ..."))
        await wait_for(pilot, lambda: "WEDGED" in str(pane.query_one("#deploy-state").render()), what="the badge")
        await wait_for(pilot, lambda: any("r redeploys" in n.message for n in app._notifications), what="the toast")
        assert "deployment wedged" in str(app.query_one("#status").render())  # the header
        assert app.check_action("redeploy", ()) is True  # r redeploys a wedged deployment (ACTIVE_STATES)
        core.bus.emit(changed("sparks", "vllm", "native", "stopped", "stopped"))
        await wait_for(pilot, lambda: not pane.has_class("-serving"), what="the block hidden once stopped")


WHY = (
    "a one-token completion got no answer in 30 s while /health answers 200, and the engine exports no "
    "generation-token counter to tell a stalled rank from a batch busy with long requests"
)


def test_a_silent_probe_the_metrics_cannot_judge_is_shown_as_unknown_with_why():
    trt = {
        **STATS,
        "engine": "trtllm",
        "generation_tokens_per_s": None,
        "missing": ["generation_tokens", "kv_cache_usage"],
    }
    text = serving_block(trt, {}, None, WHY).plain
    assert "not exported: generation_tokens, kv_cache_usage" in text
    assert text.splitlines()[-1] == "liveness unknown: " + WHY
    assert "liveness" not in serving_block(trt, {}).plain  # nothing said while probes answer
    lost = serving_block({"scrapes": 0}, {}, "no /prometheus/metrics", WHY).plain
    assert lost.startswith("serving no metrics:") and "liveness unknown: " + WHY in lost


async def test_the_launch_pane_shows_unknown_liveness_whole_and_drops_it_when_tokens_flow(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        pane = app.launch_pane
        app.query_one("#panes").active = "pane-launch"
        trt = {**STATS, "engine": "trtllm", "missing": ["generation_tokens"]}
        core.bus.emit(ServingStats("sparks", trt, {}, None, WHY))
        block = pane.query_one("#serving")
        await wait_for(pilot, lambda: "liveness unknown" in str(block.render()), what="the unknown line")
        await wait_for(pilot, lambda: block.region.height > 0, what="the block on screen")
        shown = " ".join(strip.text.strip() for strip in block.render_lines(block.region.reset_offset))
        assert "not exported: generation_tokens" in shown and shown.rstrip().endswith("long requests"), shown  # whole
        core.bus.emit(ServingStats("sparks", trt, {}))
        await wait_for(pilot, lambda: "liveness" not in str(block.render()), what="the line gone once tokens flow")
