"""/metrics text is remote output: any edit of a real exposition is read or counted, never raised."""

from __future__ import annotations

from hypothesis import given
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from sparktui.core.serving.metrics import Serving, parse

from .strategies import budget, mutated


def _seed() -> str:
    reg = CollectorRegistry()
    lab = ["model_name", "engine"]
    Gauge("vllm:num_requests_running", "r", lab, registry=reg).labels("m", "0").set(3)
    Gauge("vllm:kv_cache_usage_perc", "kv", lab, registry=reg).labels("m", "0").set(0.5)
    Counter("vllm:generation_tokens", "g", lab, registry=reg).labels("m", "0").inc(1234)
    h = Histogram("vllm:time_to_first_token_seconds", "t", lab, buckets=[0.01, 0.1, 1.0], registry=reg)
    h.labels("m", "0").observe(0.05)
    return generate_latest(reg).decode()


SEED = _seed()


@budget(300)
@given(mutated(SEED))
def test_any_edit_of_an_exposition_is_read_or_counted(text):
    view = Serving("vllm")
    for at in (0.0, 10.0):
        s = parse(text, "vllm", None, at=at)
        assert (s.error is None) or (not s.values and not s.buckets)
        view.add(s)
    j = view.to_json()  # never raises, whatever was read
    assert j["parse_errors"] + j["scrapes"] == 2
    for k in ("ttft_p50_s", "ttft_p90_s"):
        assert j[k] is None or j[k] >= 0
