"""`bench` in the demo: the simulated engines' image holds no benchmark client (its `vllm` serves only), and
bench says so with the fix instead of a client's usage error; nothing of the attempt stays running."""
from __future__ import annotations

import json

from .conftest import sparktui


async def test_bench_in_the_demo_names_the_missing_client_with_the_fix(demo, cli_env):
    conf = ["--config", str(demo.config_path)]
    rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", "--json")
    assert rc == 0, out + err
    try:
        rc, out, err = await sparktui(cli_env, *conf, "launch", "--engine", "vllm", "--wait", "--no-preflight",
                                      "--yes", "--json", timeout=240)
        assert rc == 0 and json.loads(out)["state"] == "ready", out + err
        rc, out, err = await sparktui(cli_env, *conf, "bench", "--concurrency", "1", "--json", timeout=240)
        doc = json.loads(out)
        assert rc == 1 and doc["reason"] == "client missing", out + err
        assert "has no `bench serve`" in doc["error"] and "install vllm on spark1" in doc["fix"]
        assert "bench: concurrency 1" in err  # the client was started on the head, and refused
    finally:
        await sparktui(cli_env, *conf, "stop", "--yes", timeout=120)
