"""/metrics on the simulated engines: each release's names and types, in the Prometheus text format, moving
as requests are served."""

from __future__ import annotations

import re

import pytest

from sparktui.sim import httpapi
from sparktui.sim.metrics import EngineMetrics

from .test_sim_http import request


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("SPARKTUI_SIM_SPEED", "2000")


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")


def parse(text: str) -> tuple[dict[str, str], dict[tuple[str, frozenset], float]]:
    """(family -> type, (sample name, labels) -> value), checking every line is well formed."""
    types, samples, helped = {}, {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name in helped, f"TYPE before HELP: {line}"
            types[name] = kind
        else:
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            samples[(m.group(1), labels)] = float(m.group(4))
    return types, samples


def total(samples, name: str, **want) -> float:
    return sum(
        v for (n, labels), v in samples.items() if n == name and all((k, str(x)) in labels for k, x in want.items())
    )


async def scrape(port: int):
    status, headers, body, *_ = await request(port, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(body.decode())


@pytest.mark.parametrize("version,deprecated", [("0.33.0", False), ("0.11.0", True)])
async def test_vllm_metrics_move_as_it_serves(version, deprecated):
    tpot = "vllm:request_time_per_output_token_seconds"
    state = httpapi.EngineState("vllm", "qwen", "/m", 4096, version)
    state.status, state.kv_tokens = "ready", 10000
    api = httpapi.ApiServer(state, lambda c, r: None)
    await api.start("127.0.0.1", 0)
    port = api._server.sockets[0].getsockname()[1]
    try:
        types, before = await scrape(port)
        assert types["vllm:prompt_tokens_total"] == "counter"
        assert types["vllm:time_to_first_token_seconds"] == "histogram"
        assert types["vllm:num_requests_running"] == "gauge" and types[tpot] == "histogram"
        assert total(before, "vllm:generation_tokens_total") == 0
        assert total(before, "vllm:request_success_total", finished_reason="length") == 0  # pre-created
        for _ in range(2):
            await request(
                port,
                "POST",
                "/v1/completions",
                {"prompt": "abcd" * 25, "max_tokens": 20, "ignore_eos": True, "stream": True},
            )
        _, after = await scrape(port)
        lab = {"model_name": "qwen", "engine": "0"}
        assert total(after, "vllm:generation_tokens_total", **lab) == 40
        assert total(after, "vllm:prompt_tokens_total", **lab) == 50
        assert total(after, "vllm:request_success_total", finished_reason="length") == 2
        assert total(after, "vllm:time_to_first_token_seconds_count") == 2
        assert total(after, "vllm:inter_token_latency_seconds_count") == 38
        assert total(after, f"{tpot}_count") == 2
        assert total(after, "vllm:time_per_output_token_seconds_count") == (38 if deprecated else 0)
        assert total(after, "vllm:inter_token_latency_seconds_sum") > 0
        buckets = sorted(
            (float(dict(lbl)["le"]), v)
            for (n, lbl), v in after.items()
            if n == "vllm:inter_token_latency_seconds_bucket"
        )
        assert buckets[-1] == (float("inf"), 38) and all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
        assert total(after, "vllm:num_requests_running") == 0
    finally:
        await api.close()


@pytest.mark.parametrize("version,streaming_label", [("0.5.23", True), ("0.5.3.post3", False)])
async def test_sglang_metrics_need_enable_metrics_and_use_its_names(version, streaming_label):
    state = httpapi.EngineState("sglang", "qwen", "/m", 4096, version, metrics_enabled=False)
    state.status = "ready"
    api = httpapi.ApiServer(state, lambda c, r: None)
    await api.start("127.0.0.1", 0)
    port = api._server.sockets[0].getsockname()[1]
    try:
        assert (await request(port, "GET", "/metrics"))[0] == 404  # as without --enable-metrics
        state.metrics_enabled = True
        await request(
            port,
            "POST",
            "/generate",
            {"text": "hi", "stream": True, "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}},
        )
        types, s = await scrape(port)
        assert types["sglang:generation_tokens_total"] == "counter"
        assert types["sglang:num_running_reqs"] == "gauge" and types["sglang:token_usage"] == "gauge"
        assert types["sglang:inter_token_latency_seconds"] == "histogram"
        want = {"is_streaming": "true"} if streaming_label else {}
        assert total(s, "sglang:generation_tokens_total", model_name="qwen", **want) == 8
        assert total(s, "sglang:num_requests_total") == 1
        assert total(s, "sglang:inter_token_latency_seconds_count") == 7
        assert total(s, "sglang:num_running_reqs", tp_rank="0", engine_type="unified") == 0
    finally:
        await api.close()


def test_gauges_are_read_live_and_label_values_escaped():
    live = {"running": 3.0, "waiting": 1.0, "kv_usage": 0.25}
    m = EngineMetrics("vllm", "0.33.0", 'we"ird\\name', lambda: live)
    _, s = parse(m.render())
    assert total(s, "vllm:num_requests_running") == 3 and total(s, "vllm:kv_cache_usage_perc") == 0.25
    assert ("model_name", 'we\\"ird\\\\name') in next(lbl for (n, lbl) in s if n == "vllm:num_requests_waiting")
    live["running"] = 0.0
    assert total(parse(m.render())[1], "vllm:num_requests_running") == 0


def test_an_unknown_release_plays_the_nearest_older_one():
    assert "vllm:time_per_output_token_seconds" in EngineMetrics("vllm", "0.10.2", "m").render()
    assert "vllm:time_per_output_token_seconds" not in EngineMetrics("vllm", "0.32.1", "m").render()
    assert (
        "# TYPE sglang:request_time_per_output_token_seconds histogram"
        in EngineMetrics("sglang", "0.6.0", "m").render()
    )
    assert "request_time_per_output_token" not in EngineMetrics("sglang", "0.5.4", "m").render()


# TensorRT-LLM 1.3.0rc3's tensorrt_llm/metrics/collector.py, as a scraper sees the families (counter without _total)
TRTLLM_1_3 = {
    "trtllm_request_success": "counter",
    "trtllm_e2e_request_latency_seconds": "histogram",
    "trtllm_time_to_first_token_seconds": "histogram",
    "trtllm_time_per_output_token_seconds": "histogram",
    "trtllm_request_queue_time_seconds": "histogram",
}


async def trtllm_api():
    from sparktui.sim.trtllm_server import TrtApi

    state = httpapi.EngineState("vllm", "Tiny-Model", "/m/Tiny-Model", 4096, "1.3.0rc5", metrics_kind="trtllm")
    state.status, state.kv_tokens = "ready", 10000
    api = TrtApi(state, prometheus=True)
    await api.start("127.0.0.1", 0)
    return api, api._server.sockets[0].getsockname()[1]


async def prometheus_page(port: int) -> str:
    status, headers, body, *_ = await request(port, "GET", "/prometheus/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    return body.decode()


async def chat(port: int, max_tokens: int) -> None:
    status, *_ = await request(
        port,
        "POST",
        "/v1/chat/completions",
        {
            "model": "Tiny-Model",
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert status == 200


async def test_trtllm_serves_its_releases_series_and_they_move_as_it_serves():
    from prometheus_client.parser import text_string_to_metric_families

    api, port = await trtllm_api()
    try:
        assert await prometheus_page(port) == "\n"  # the collector shows a family once a series of it is touched
        for _ in range(2):
            await chat(port, 6)
        fams = {f.name: f for f in text_string_to_metric_families(await prometheus_page(port))}
    finally:
        await api.close()
    assert {n: f.type for n, f in fams.items()} == TRTLLM_1_3
    samples = [s for f in fams.values() for s in f.samples]
    assert not [s.name for s in samples if s.name.endswith("_created")]  # a multiprocess page has none
    assert all((s.labels["model_name"], s.labels["engine_type"]) == ("undefined", "undefined") for s in samples)
    by_name = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s)
    assert [(s.labels["finished_reason"], s.value) for s in by_name["trtllm_request_success_total"]] == [
        ("length", 2.0)
    ]
    for fam in TRTLLM_1_3:
        if TRTLLM_1_3[fam] == "histogram":
            assert [s.value for s in by_name[fam + "_count"]] == [2.0], fam
            assert by_name[fam + "_sum"][0].value > 0, fam
    # per request, (last - first token) / 5: no more than the whole request took
    assert (
        by_name["trtllm_time_per_output_token_seconds_sum"][0].value
        < by_name["trtllm_e2e_request_latency_seconds_sum"][0].value
    )


REAL_MULTIPROCESS = """
import json, sys
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from sparktui.sim.metrics_catalog import catalog
specs, _ = catalog("trtllm", "1.3.0rc3")
lab = {"model_name": "undefined", "engine_type": "undefined"}
made = {s.role: (Counter(s.name, s.help, [*lab, *s.extra]) if s.kind == "counter"
                 else Histogram(s.name, s.help, [*lab], buckets=s.buckets)) for s in specs}
for role, value, reason in json.loads(sys.argv[1]):
    if reason:
        made[role].labels(**lab, finished_reason=reason).inc(value)
    else:
        made[role].labels(**lab).observe(value)
reg = CollectorRegistry()
multiprocess.MultiProcessCollector(reg)
sys.stdout.write(generate_latest(reg).decode())
"""


def test_trtllm_page_is_what_prometheus_clients_multiprocess_collector_writes(tmp_path):
    """The same events through the real prometheus_client in multiprocess mode (as trtllm-serve runs it) give the
    same lines; only the order of families differs there (its directory's listing order)."""
    import json
    import os
    import subprocess
    import sys

    events = [
        ("requests", 1, "stop"),
        ("e2e", 1.25, None),
        ("ttft", 0.3, None),
        ("tpot", 0.02, None),
        ("queue", 0.5, None),
        ("requests", 1, "length"),
        ("ttft", 0.07, None),
        ("e2e", 9000.0, None),
    ]
    mine = EngineMetrics("trtllm", "1.3.0rc5", "Tiny-Model")
    for role, value, reason in events:
        if reason:
            mine.inc(role, value, finish=reason)
        else:
            mine.observe(role, value)
    import sparktui

    root = os.path.dirname(os.path.dirname(sparktui.__file__))
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path), PYTHONPATH=root)
    real = subprocess.run(
        [sys.executable, "-c", REAL_MULTIPROCESS, json.dumps(events)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout

    def families(text: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for line in text.splitlines():
            if line.startswith("# HELP "):
                name = line.split()[2]
            out.setdefault(name, []).append(line)
        return out

    assert families(mine.render()) == families(real)
    assert len(families(real)) == 5


async def test_sparktuis_reader_gets_ttft_and_itl_from_it_and_names_what_the_release_lacks():
    from sparktui.core.serving.metrics import Serving, parse as read

    api, port = await trtllm_api()
    try:
        view = Serving("trtllm", "1.3.0rc5")
        view.add(read(await prometheus_page(port), "trtllm", "1.3.0rc5", at=0.0))
        for n in (4, 12):
            await chat(port, n)
        view.add(read(await prometheus_page(port), "trtllm", "1.3.0rc5", at=2.0))
    finally:
        await api.close()
    j = view.to_json()
    assert j["parse_errors"] == 0 and j["scrapes"] == 2
    assert 0 < j["ttft_p50_s"] <= j["ttft_p90_s"] and 0 < j["itl_p50_s"] <= j["itl_p90_s"]
    assert j["missing"] == ["running", "waiting", "kv_cache_usage", "prompt_tokens", "generation_tokens"]
    assert (j["running"], j["generation_tokens_per_s"], j["generation_tokens_total"]) == (None, None, None)
