"""A demo node's memory moves with the engines in its containers, as a GB10's does, and a stop gives it all
back; in the scenario `memory` spark2 runs out while the weights load, and the guard stops the launch."""

from __future__ import annotations

import json
import re

from sparktui.core.config.config import load_config
from sparktui.core.remote.ssh import Cluster
from sparktui.demo import configfile, hardware
from sparktui.demo.cluster import DemoCluster

from .conftest import require_namespaces, small, sparktui

GIB_KB = 1 << 20


def available_gib(meminfo: str) -> float:
    return int(re.search(r"^MemAvailable:\s+(\d+)", meminfo, re.M).group(1)) / GIB_KB


async def meminfo(cluster: Cluster, name: str, *container: str) -> str:
    r = await cluster[name].run(
        ["docker", "exec", *container, "cat", "/proc/meminfo"] if container else ["cat", "/proc/meminfo"]
    )
    assert r.ok, r.stderr
    return r.stdout


async def test_a_launch_takes_each_nodes_memory_and_a_stop_gives_it_back(tmp_path, cli_env):
    require_namespaces()
    demo = await DemoCluster(small(tmp_path, scenario="happy")).start()
    try:
        conf = ["--config", str(demo.config_path)]
        config = load_config(demo.config_path)
        async with Cluster(config) as cluster:
            start = {n: available_gib(await meminfo(cluster, n)) for n in ("spark1", "spark2")}
            assert start["spark1"] == start["spark2"] == hardware.MEM_AVAILABLE_KB / GIB_KB
            rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", "--json")
            assert rc == 0, out + err
            try:
                rc, out, err = await sparktui(
                    cli_env,
                    *conf,
                    "launch",
                    "--engine",
                    "sglang",
                    "--wait",
                    "--no-preflight",
                    "--yes",
                    "--json",
                    timeout=240,
                )
                doc = json.loads(out)
                assert rc == 0 and doc["state"] == "ready", out + err
                now = {n: available_gib(await meminfo(cluster, n)) for n in ("spark1", "spark2")}
                # the same ranks on both nodes: the same drop, the weights (half the model each) and the KV pool
                drop = start["spark1"] - now["spark1"]
                assert start["spark2"] - now["spark2"] == drop
                assert 85 < drop < 105  # the share of the GPU the plan gives SGLang, plus its context and graphs
                # the guard read the same figures, and they are clear of its floor and band
                assert {n: m["level"] for n, m in doc["memory"].items()} == {"spark1": "ok", "spark2": "ok"}
                # what the engine's container reads as /proc/meminfo is its node's
                r = await cluster["spark2"].run(["docker", "ps", "-q", "--filter", "label=sparktui.deployment"])
                (cid,) = r.stdout.split()
                assert available_gib(await meminfo(cluster, "spark2", cid)) == now["spark2"]
            finally:
                rc, out, err = await sparktui(cli_env, *conf, "stop", "--yes", timeout=120)
            assert rc == 0, out + err
            assert {n: available_gib(await meminfo(cluster, n)) for n in ("spark1", "spark2")} == start
    finally:
        await demo.stop()


async def test_the_memory_scenario_warns_then_the_guard_stops_the_launch_and_the_nodes_live(tmp_path, cli_env):
    require_namespaces()
    # the demo's own pace: the memory falls through the warning band for seconds, read every second
    demo = await DemoCluster(small(tmp_path, scenario="memory", speed=10.0)).start()
    try:
        conf = ["--config", str(demo.config_path)]
        config = load_config(demo.config_path)
        assert config.memory.guard and config.memory.floor == "4GiB"
        async with Cluster(config) as cluster:
            start = {n: available_gib(await meminfo(cluster, n)) for n in ("spark1", "spark2")}
            in_use = configfile.SCENARIO_IN_USE_KB["memory"][2] / GIB_KB
            assert start["spark2"] == start["spark1"] - in_use
            rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", "--json")
            assert rc == 0, out + err
            rc, out, err = await sparktui(
                cli_env, *conf, "launch", "--engine", "sglang", "--wait", "--no-preflight", "--yes", timeout=240
            )
            assert rc == 1, out + err
            said = out + err
            # the line falls shard by shard: first the warning, then the stop with its reason and numbers
            warn, stop = said.find("memory low on spark2"), said.find("memory floor on spark2")
            assert 0 <= warn < stop, said
            assert re.search(r"memory floor on spark2: \d+\.\d GiB available, under the 4\.0 GiB floor", said), said
            # while it loads: the weights were coming in at the warning, and it never served
            assert "spark2 loading weights" in said[:warn] and "spark2 weights loaded" not in said[:warn]
            assert not re.search(r"deployment \S+ ready\b", said), said
            # nothing of the deployment is left, every node still answers, and its memory came back
            r = await cluster["spark2"].run(["docker", "ps", "-aq", "--filter", "label=sparktui.deployment"])
            assert r.ok and r.stdout.split() == []
            rc, out, err = await sparktui(cli_env, *conf, "status", "--json")
            [dep] = json.loads(out)["deployments"]
            assert dep["state"] == "failed" and dep["stopped_by"] == "memory guard", dep
            assert {n: available_gib(await meminfo(cluster, n)) for n in ("spark1", "spark2")} == start
    finally:
        await demo.stop()
