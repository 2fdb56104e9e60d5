"""A bench run beside other clients is kept as tainted, with the reason, and `sparktui bench` says so: the
engine's own /metrics (read before and after the run) served more requests than the client sent."""

from __future__ import annotations

import asyncio
import json
import urllib.request

from .test_bench_stop import head_with_sim_client, serve, slow_vllm, start_bench
from .test_deploy_fakes import fake_cluster  # noqa: F401 (fixture)


def other_client(port: int) -> None:
    body = json.dumps({"model": "sim-model", "prompt": "hello there", "max_tokens": 2}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200


async def test_a_bench_beside_other_traffic_is_kept_tainted_and_said(fake_cluster, tmp_path):
    fc, conf = await head_with_sim_client(fake_cluster, tmp_path)
    eng, port = slow_vllm(fc.config.model.path)
    with eng:
        eng.wait_for("Application startup complete.", timeout=120)
        serve(fc, conf, "vllm", port)
        # 8 requests of 150 tokens at 50x: seconds of client run, where the 3 others below take ~0.1 s
        p, _, _, seen = await start_bench(conf, "--output-len", "150", "--json")
        for _ in range(3):  # served while the bench's client runs
            await asyncio.to_thread(other_client, port)
        out, err = await asyncio.wait_for(p.communicate(), 300)
    assert p.returncode == 0, err
    doc = json.loads(out)
    assert doc["tainted"] == "other traffic: the engine served 3 requests besides the bench's"
    assert all(r["tainted"] == doc["tainted"] for r in doc["rows"])
    assert b"bench: tainted run (other traffic" in seen + err and b"not compared with clean runs" in err
