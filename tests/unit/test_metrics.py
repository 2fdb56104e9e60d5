"""/metrics read into the serving view, on exposition text written by the real prometheus_client.

The series are declared the way each engine declares them (names, types, labels and buckets from
vllm/v1/metrics/loggers.py and sglang/srt/metrics/collector.py); the tests then play a minute of
serving and check the rates, gauges and quantiles the view derives.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from sparktui.core.engines.metricnames import names_for
from sparktui.core.serving.metrics import Serving, parse, quantile

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0]


class VllmExport:
    """vLLM V1's series (one engine, label engine="0")."""

    def __init__(self, kv_name="vllm:kv_cache_usage_perc"):
        self.reg = CollectorRegistry()
        lab = ["model_name", "engine"]
        self.running = Gauge("vllm:num_requests_running", "running", lab, registry=self.reg).labels("m", "0")
        self.waiting = Gauge("vllm:num_requests_waiting", "waiting", lab, registry=self.reg).labels("m", "0")
        self.kv = Gauge(kv_name, "kv", lab, registry=self.reg).labels("m", "0")
        self.prompt = Counter("vllm:prompt_tokens", "prompt", lab, registry=self.reg).labels("m", "0")
        self.gen = Counter("vllm:generation_tokens", "gen", lab, registry=self.reg).labels("m", "0")
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "ttft", lab, buckets=TTFT_BUCKETS, registry=self.reg
        ).labels("m", "0")
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds", "itl", lab, buckets=ITL_BUCKETS, registry=self.reg
        ).labels("m", "0")

    def text(self) -> str:
        return generate_latest(self.reg).decode()


class SglangExport:
    """SGLang's series: scheduler gauges per TP rank (every rank the same), tokenizer counters once."""

    def __init__(self, tp=2):
        self.reg = CollectorRegistry()
        lab = ["model_name", "engine_type", "tp_rank", "pp_rank"]
        g = {
            n: Gauge(n, n, lab, registry=self.reg)
            for n in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage")
        }
        self.gauges = [{n: g[n].labels("m", "unified", str(r), "0") for n in g} for r in range(tp)]
        tl = ["model_name"]
        self.prompt = Counter("sglang:prompt_tokens_total", "p", tl, registry=self.reg).labels("m")
        self.gen = Counter("sglang:generation_tokens_total", "g", tl, registry=self.reg).labels("m")
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds", "t", tl, buckets=TTFT_BUCKETS, registry=self.reg
        ).labels("m")
        self.itl = Histogram(
            "sglang:inter_token_latency_seconds", "i", tl, buckets=ITL_BUCKETS, registry=self.reg
        ).labels("m")

    def set(self, running, waiting, usage):
        for g in self.gauges:
            g["sglang:num_running_reqs"].set(running)
            g["sglang:num_queue_reqs"].set(waiting)
            g["sglang:token_usage"].set(usage)

    def text(self) -> str:
        return generate_latest(self.reg).decode()


def test_vllm_a_minute_of_serving_gives_rates_gauges_and_quantiles():
    ex = VllmExport()
    view = Serving("vllm", "0.33.0")
    ex.prompt.inc(1000)
    ex.gen.inc(500)
    for _ in range(10):
        ex.ttft.observe(3.0)  # start-up requests, outside the window
    view.add(parse(ex.text(), "vllm", "0.33.0", at=100.0))
    ex.running.set(8)
    ex.waiting.set(3)
    ex.kv.set(0.42)
    ex.prompt.inc(6000)
    ex.gen.inc(1800)
    for i in range(100):
        ex.ttft.observe(0.03 if i < 50 else 0.09)
        ex.itl.observe(0.02)
    view.add(parse(ex.text(), "vllm", "0.33.0", at=160.0))
    j = view.to_json()
    assert (j["engine"], j["running"], j["waiting"], j["kv_cache_usage"]) == ("vllm", 8, 3, 0.42)
    assert j["generation_tokens_per_s"] == 30.0 and j["prompt_tokens_per_s"] == 100.0
    # p50 falls on the bucket edge 0.04 (50 of 100 at or below it), p90 inside (0.08, 0.1]
    assert j["ttft_p50_s"] == 0.04 and 0.08 < j["ttft_p90_s"] <= 0.1
    assert 0.01 < j["itl_p50_s"] <= 0.025
    assert j["missing"] == [] and j["parse_errors"] == 0
    assert view.series("generation_tokens") == [30.0]


def test_one_scrape_has_gauges_but_no_rate_yet():
    ex = VllmExport()
    ex.running.set(1)
    view = Serving("vllm")
    view.add(parse(ex.text(), "vllm", None, at=5.0))
    j = view.to_json()
    assert j["running"] == 1 and j["generation_tokens_per_s"] is None and j["ttft_p50_s"] is None


def test_sglang_tp_ranks_repeat_one_scheduler_and_are_counted_once():
    ex = SglangExport(tp=4)
    view = Serving("sglang", "0.5.23")
    view.add(parse(ex.text(), "sglang", "0.5.23", at=0.0))
    ex.set(running=12, waiting=2, usage=0.75)
    ex.gen.inc(1200)
    view.add(parse(ex.text(), "sglang", "0.5.23", at=10.0))
    j = view.to_json()
    assert (j["running"], j["waiting"], j["kv_cache_usage"]) == (12, 2, 0.75)
    assert j["generation_tokens_per_s"] == 120.0


def test_an_old_vllm_name_is_read_for_a_release_that_exports_it():
    ex = VllmExport(kv_name="vllm:gpu_cache_usage_perc")
    ex.kv.set(0.5)
    assert names_for("vllm", "0.9.0")["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert parse(ex.text(), "vllm", "0.9.0").values["kv_cache_usage"] == 0.5
    assert parse(ex.text(), "vllm", None).values["kv_cache_usage"] == 0.5  # an unknown release looks for both


def test_an_engine_without_the_series_says_which_are_missing():
    reg = CollectorRegistry()
    Gauge("vllm:num_requests_running", "r", registry=reg).set(2)
    s = parse(generate_latest(reg).decode(), "vllm", "0.33.0")
    assert s.values == {"running": 2.0}
    assert set(s.missing) == {"waiting", "kv_cache_usage", "prompt_tokens", "generation_tokens", "ttft", "itl"}


@pytest.mark.parametrize(
    "text", ['vllm:num_requests_running{engine="0" 3\n', "<html>502 Bad Gateway</html>\n", "\x00\xff garbage {{{\n"]
)
def test_text_that_does_not_parse_is_counted_never_raised(text):
    view = Serving("vllm")
    view.add(parse(text, "vllm"))
    j = view.to_json()
    assert j["parse_errors"] == 1 and j["last_parse_error"] and j["scrapes"] == 0


def test_a_restarted_engine_gives_no_negative_rate():
    ex = VllmExport()
    ex.gen.inc(5000)
    view = Serving("vllm")
    view.add(parse(ex.text(), "vllm", at=0.0))
    view.add(parse(VllmExport().text(), "vllm", at=10.0))
    assert view.to_json()["generation_tokens_per_s"] is None


def test_quantile_follows_prometheus_histogram_quantile():
    b = [(0.1, 10.0), (0.2, 30.0), (0.4, 40.0), (float("inf"), 40.0)]
    assert quantile(0.25, b) == pytest.approx(0.1)
    assert quantile(0.5, b) == pytest.approx(0.15)
    assert quantile(0.9, b) == pytest.approx(0.32)  # rank 36 of 40: 6 tenths into (0.2, 0.4]
    assert quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None
    assert quantile(0.99, [(0.1, 1.0), (float("inf"), 5.0)]) == 0.1  # beyond the last bound: that bound


def test_the_window_keeps_rates_to_the_last_minute():
    ex = VllmExport()
    view = Serving("vllm", window=60.0)
    view.add(parse(ex.text(), "vllm", at=0.0))
    ex.gen.inc(60000)  # a burst long ago
    view.add(parse(ex.text(), "vllm", at=100.0))
    ex.gen.inc(600)
    view.add(parse(ex.text(), "vllm", at=130.0))
    ex.gen.inc(600)
    view.add(parse(ex.text(), "vllm", at=160.0))
    assert view.to_json()["generation_tokens_per_s"] == 20.0  # 1200 tokens over 100 -> 160


def test_values_that_are_not_numbers_are_left_out():
    text = (
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running NaN\n"
        "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting +Inf\n"
    )
    s = parse(text, "vllm")
    assert s.error is None and s.values == {} and {"running", "waiting"} <= set(s.missing)
