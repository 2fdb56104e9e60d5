"""`sparktui metrics` as a user runs it: /metrics read on the head through the SSH connection.

The engine's port is a real HTTP server on this machine's loopback (where the stand-in node's
forwarding lands), its text written by the real prometheus_client with vLLM V1's series.
"""

from __future__ import annotations

import asyncio
import json

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from .test_deploy_cli import ours, sparktui, write_config
from .test_deploy_fakes import fake_cluster  # noqa: F401 (fixture)


class Engine:
    """Serves /metrics; every scrape finds 300 more generated tokens and 50 more first tokens at 40 ms."""

    def __init__(self, status: int = 200, text: str | None = None, answers: int | None = None):
        self.status, self.text, self.scrapes, self.answers = status, text, 0, answers
        self.reg = CollectorRegistry()
        lab = ["model_name", "engine"]
        Gauge("vllm:num_requests_running", "r", lab, registry=self.reg).labels("m", "0").set(8)
        Gauge("vllm:num_requests_waiting", "w", lab, registry=self.reg).labels("m", "0").set(2)
        Gauge("vllm:kv_cache_usage_perc", "kv", lab, registry=self.reg).labels("m", "0").set(0.25)
        self.gen = Counter("vllm:generation_tokens", "g", lab, registry=self.reg).labels("m", "0")
        self.prompt = Counter("vllm:prompt_tokens", "p", lab, registry=self.reg).labels("m", "0")
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "t", lab, buckets=[0.02, 0.04, 0.08, 0.16], registry=self.reg
        ).labels("m", "0")

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        line = await r.readline()
        while (await r.readline()).strip():
            pass
        assert line.startswith(b"GET /metrics ")
        self.scrapes += 1
        if self.answers is not None and self.scrapes > self.answers:  # gone: the port answers nothing
            w.close()
            return
        self.gen.inc(300)
        self.prompt.inc(1000)
        for _ in range(50):
            self.ttft.observe(0.03)
        body = (self.text if self.text is not None else generate_latest(self.reg).decode()).encode()
        w.write(
            f"HTTP/1.1 {self.status} X\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n".encode()
            + body
        )
        await w.drain()
        w.close()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]


async def _setup(fake_cluster, tmp_path, engine: Engine, which: str = "vllm"):
    port = await engine.start()
    fc = await fake_cluster(1)
    fc.nodes[0].server.forwarding = True
    conf = write_config(fc.config, tmp_path / "c.yaml")
    doc = conf.read_text() + f"engine:\n  {which}_port: {port}\n"
    conf.write_text(doc)
    fc["n1"].add_container(f"sparktui-lab-{which}-0", ours("lab", 0, which))
    return conf


async def test_metrics_json_reports_the_serving_keys_from_two_scrapes(fake_cluster, tmp_path):
    eng = Engine()
    conf = await _setup(fake_cluster, tmp_path, eng)
    rc, out, err = await sparktui("metrics", "--json", "--interval", "0.5", "--config", str(conf))
    eng.server.close()
    assert rc == 0, err
    j = json.loads(out)
    assert (j["engine"], j["running"], j["waiting"], j["kv_cache_usage"]) == ("vllm", 8, 2, 0.25)
    assert j["generation_tokens_per_s"] > 0 and j["prompt_tokens_per_s"] > j["generation_tokens_per_s"]
    assert 0.02 < j["ttft_p50_s"] <= 0.04  # the 50 requests served between the two scrapes
    assert j["missing"] == ["itl"] and j["parse_errors"] == 0
    assert eng.scrapes == 2


async def test_metrics_watch_prints_a_line_per_interval_and_stops_after_count(fake_cluster, tmp_path):
    eng = Engine()
    conf = await _setup(fake_cluster, tmp_path, eng)
    rc, out, err = await sparktui(
        "metrics", "--watch", "--count", "3", "--json", "--interval", "0.2", "--config", str(conf)
    )
    eng.server.close()
    assert rc == 0, err
    assert len(out.splitlines()) == 3 and eng.scrapes == 4


async def test_metrics_watch_json_says_each_tick_when_the_engine_is_unreachable(fake_cluster, tmp_path):
    eng = Engine(answers=3)
    conf = await _setup(fake_cluster, tmp_path, eng)
    rc, out, err = await sparktui(
        "metrics", "--watch", "--count", "4", "--json", "--interval", "0.2", "--config", str(conf)
    )
    eng.server.close()
    assert rc == 0, err
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["reachable"] for d in docs] == [True, True, False, False]
    assert docs[1]["generation_tokens_per_s"] > 0
    for d in docs[2:]:  # why, and where, each time
        assert d["deployment"] == "lab" and "no answer from n1:127.0.0.1:" in d["error"]
        assert "generation_tokens_per_s" not in d
    assert docs[2]["node"] == "n1"


async def test_sglang_without_metrics_is_named_with_the_fix(fake_cluster, tmp_path):
    eng = Engine(status=404, text="Not Found")
    conf = await _setup(fake_cluster, tmp_path, eng, which="sglang")
    rc, out, err = await sparktui("metrics", "--config", str(conf))
    eng.server.close()
    assert rc == 1 and "--enable-metrics" in err and "Traceback" not in err


async def test_text_that_does_not_parse_is_counted_not_a_traceback(fake_cluster, tmp_path):
    eng = Engine(text="<html>502 Bad Gateway</html>\n")
    conf = await _setup(fake_cluster, tmp_path, eng)
    rc, out, err = await sparktui("metrics", "--json", "--interval", "0.2", "--config", str(conf))
    eng.server.close()
    assert rc == 0, err
    j = json.loads(out)
    assert j["parse_errors"] == 2 and j["last_parse_error"] and j["running"] is None
