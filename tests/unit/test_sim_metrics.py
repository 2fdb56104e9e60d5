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


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')


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
    return sum(v for (n, labels), v in samples.items()
               if n == name and all((k, str(x)) in labels for k, x in want.items()))


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
            await request(port, "POST", "/v1/completions", {"prompt": "abcd" * 25, "max_tokens": 20,
                                                            "ignore_eos": True, "stream": True})
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
        buckets = sorted((float(dict(lbl)["le"]), v) for (n, lbl), v in after.items()
                         if n == "vllm:inter_token_latency_seconds_bucket")
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
        await request(port, "POST", "/generate", {"text": "hi", "stream": True,
                                                  "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}})
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
    assert "# TYPE sglang:request_time_per_output_token_seconds histogram" in EngineMetrics(
        "sglang", "0.6.0", "m").render()
    assert "request_time_per_output_token" not in EngineMetrics("sglang", "0.5.4", "m").render()
