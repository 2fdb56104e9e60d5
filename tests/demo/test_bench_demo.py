"""`bench` in the demo: the simulated engines' image carries a simulated `vllm bench serve` (as a vLLM image
carries the real one), so bench runs the client on the head against the simulated engine and gives a row per
concurrency, read from the client's own result files; nothing of the run stays behind on the head."""

from __future__ import annotations

import json

from .conftest import sparktui


async def test_bench_in_the_demo_gives_a_row_per_concurrency(demo, cli_env):
    conf = ["--config", str(demo.config_path)]
    rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", "--json")
    assert rc == 0, out + err
    try:
        rc, out, err = await sparktui(
            cli_env, *conf, "launch", "--engine", "vllm", "--wait", "--no-preflight", "--yes", "--json", timeout=240
        )
        assert rc == 0 and json.loads(out)["state"] == "ready", out + err
        rc, out, err = await sparktui(
            cli_env,
            *conf,
            "bench",
            "--concurrency",
            "1,4",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--json",
            timeout=240,
        )
        assert rc == 0, out + err
        doc = json.loads(out)
        rows = doc["rows"]
        assert doc["tainted"] == ""  # the bench alone on the engine: its own counters agree
        assert [r["concurrency"] for r in rows] == [1, 4]
        for r in rows:  # figures the client measured: every request completed, with real latencies
            assert r["engine"] == "vllm" and r["failed"] == 0 and r["completed"] == max(8, 4 * r["concurrency"])
            assert 0 < r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["itl_p50_ms"] > 0
            assert r["output_tokens_per_s"] > 0 and r["requests_per_s"] > 0
            assert (r["input_len"], r["output_len"]) == (64, 16)
        assert "bench: concurrency 4" in err  # progress followed from the head's log
        # the history keeps them
        rc, out, err = await sparktui(cli_env, *conf, "bench", "--history", "--json")
        assert rc == 0 and [r["concurrency"] for r in json.loads(out)["rows"]] == [1, 4], out + err
    finally:
        await sparktui(cli_env, *conf, "stop", "--yes", timeout=120)
