"""The demo's nodes are Sparks with RDMA: /dev/infiniband, both halves of the CX7 port (the twin down and
unaddressed, MTU 1500, as a fresh Spark), and the plan's fixes played on the nodes change what it says."""
from __future__ import annotations

import json

from sparktui.core.config import load_config
from sparktui.core.ssh import Cluster

from .conftest import cli_env, sparktui  # noqa: F401 - cli_env is a fixture


def _has(msgs, *words) -> bool:
    return any(all(w in m for w in words) for m in msgs)


async def _plan(demo, env) -> dict:
    rc, out, err = await sparktui(env, "--config", str(demo.config_path), "plan", "--engine", "sglang", "--json")
    try:
        return json.loads(out)
    except ValueError:
        raise AssertionError(f"plan printed no JSON (exit {rc}): {out[-2000:]} {err[-2000:]}") from None


async def test_plan_on_a_fresh_spark_then_after_the_printed_fixes(demo, cli_env):
    out = await _plan(demo, cli_env)
    warns = out["warnings"]
    assert not _has(warns, "/dev/infiniband"), warns  # RDMA as on a Spark: the container gets the device
    env = out["nodes"][0]["env"]
    assert env["NCCL_IB_HCA"] == "rocep1s0f1" and env["NCCL_IB_DISABLE"] == "0"
    assert env["NCCL_IB_GID_INDEX"] == "3"  # the RoCEv2 IPv4 entry of the node's sysfs GID table
    idle = next(w for w in warns if "idle" in w)
    assert "spark1 enP2p1s0f1np1 (roceP2p1s0f1)" in idle and "about half the link" in idle
    assert _has(warns, "MTU below 9000", "spark1 enp1s0f1np1 1500", "spark2 enp1s0f1np1 1500")

    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        for line in idle.split("on ")[1:]:  # the twin: "on spark1: `sudo ip addr add ... && sudo ip link set ... up`"
            node, _, rest = line.partition(":")
            if node in ("spark1", "spark2") and "`" in rest:
                r = await cluster[node].run(rest.split("`")[1], timeout=30)
                assert r.ok, r.stderr
        for node in ("spark1", "spark2"):
            for iface in ("enp1s0f1np1", "enP2p1s0f1np1"):
                r = await cluster[node].run(f"sudo ip link set {iface} mtu 9000", timeout=30)
                assert r.ok, r.stderr
    out = await _plan(demo, cli_env)
    assert not _has(out["warnings"], "idle") and not _has(out["warnings"], "MTU below"), out["warnings"]
    assert out["nodes"][0]["env"]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert out["nodes"][1]["env"]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert out["nodes"][1]["env"]["NCCL_IB_GID_INDEX"] == "3"  # the twin's address gave it a RoCEv2 entry too
