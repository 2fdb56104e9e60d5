"""The launch pane's serving block: metrics from READY on, with sparklines; `wedged` in the state badge."""
from __future__ import annotations

from sparktui.core.events import DeploymentChanged, ServingStats
from sparktui.tui.app import SparkApp
from sparktui.tui.present.serving import serving_block, sparkline

from .conftest import wait_for

STATS = {"engine": "vllm", "running": 3, "waiting": 1, "kv_cache_usage": 0.42, "generation_tokens_per_s": 123.4,
         "prompt_tokens_per_s": 800.0, "ttft_p50_s": 0.05, "ttft_p90_s": 0.2, "itl_p50_s": 0.02, "itl_p90_s": 0.03,
         "missing": [], "scrapes": 3, "parse_errors": 0, "last_parse_error": None}


def test_sparklines_scale_to_the_largest_value_or_a_fixed_top():
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([0.5, 1.0], top=1.0) == "▅█"
    assert sparkline([0, 0]) == "▁▁" and sparkline([]) == ""
    assert len(sparkline(list(range(100)))) == 30  # only the most recent


def test_the_block_names_every_number_and_what_is_missing_or_unreadable():
    text = serving_block({**STATS, "missing": ["itl"], "parse_errors": 2, "last_parse_error": "ValueError: x"},
                         {"generation_tokens": [10, 120], "kv_cache_usage": [0.42]}).plain
    for words in ("123.4 tok/s", "prompt 800.0 tok/s", "3 running · 1 waiting", "KV 42 %", "p50 50 ms p90 200 ms",
                  "ITL p50 20 ms", "not exported: itl", "2 unreadable scrape(s): ValueError: x"):
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
        core.bus.emit(DeploymentChanged("sparks", "vllm", "native", "wedged", "wedged: 3 request(s) running ..."))
        await wait_for(pilot, lambda: "WEDGED" in str(pane.query_one("#deploy-state").render()), what="the badge")
        await wait_for(pilot, lambda: any("r redeploys" in n.message for n in app._notifications), what="the toast")
        assert "deployment wedged" in str(app.query_one("#status").render())  # the header
        assert app.check_action("redeploy", ()) is True  # r redeploys a wedged deployment (ACTIVE_STATES)
        core.bus.emit(DeploymentChanged("sparks", "vllm", "native", "stopped", "stopped"))
        await wait_for(pilot, lambda: not pane.has_class("-serving"), what="the block hidden once stopped")
