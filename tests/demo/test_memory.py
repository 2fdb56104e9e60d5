"""A demo node's memory moves with the engines in its containers, as a GB10's does: the scenario `memory`
takes spark2 under the guard's floor once the KV cache follows the weights, and a stop gives it all back."""
from __future__ import annotations

import json
import re

from sparktui.core.config import load_config
from sparktui.core.ssh import Cluster
from sparktui.demo import configfile, hardware
from sparktui.demo.cluster import DemoCluster

from .conftest import require_namespaces, small, sparktui

GIB_KB = 1 << 20


def available_gib(meminfo: str) -> float:
    return int(re.search(r"^MemAvailable:\s+(\d+)", meminfo, re.M).group(1)) / GIB_KB


async def test_the_memory_scenario_takes_spark2_under_the_floor_and_a_stop_gives_it_back(tmp_path, cli_env):
    require_namespaces()
    demo = await DemoCluster(small(tmp_path, scenario="memory")).start()
    try:
        text = demo.config_path.read_text()
        assert 'floor: "4GiB"' in text
        # the guard off, so the launch comes up whatever it does: this is about what the nodes' memory does
        config_path = tmp_path / "unguarded.yaml"
        config_path.write_text(text.replace("memory:\n", "memory:\n  guard: false\n"))
        conf = ["--config", str(config_path)]
        config = load_config(config_path)

        async def meminfo(cluster: Cluster, name: str, *container: str) -> str:
            r = await cluster[name].run(["docker", "exec", *container, "cat", "/proc/meminfo"] if container
                                        else ["cat", "/proc/meminfo"])
            assert r.ok, r.stderr
            return r.stdout

        async with Cluster(config) as cluster:
            start = {n: available_gib(await meminfo(cluster, n)) for n in ("spark1", "spark2")}
            in_use = configfile.SCENARIO_IN_USE_KB["memory"][2] / GIB_KB
            assert start["spark1"] == hardware.MEM_AVAILABLE_KB / GIB_KB
            assert start["spark2"] == start["spark1"] - in_use
            rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", "--json")
            assert rc == 0, out + err
            try:
                rc, out, err = await sparktui(cli_env, *conf, "launch", "--engine", "sglang", "--wait",
                                              "--no-preflight", "--yes", "--json", timeout=240)
                assert rc == 0 and json.loads(out)["state"] == "ready", out + err
                now = {n: available_gib(await meminfo(cluster, n)) for n in ("spark1", "spark2")}
                # the same ranks on both nodes: the same drop, the weights (half the model each) and the KV pool
                drop = start["spark1"] - now["spark1"]
                assert start["spark2"] - now["spark2"] == drop
                assert 85 < drop < 105  # the share of the GPU the plan gives SGLang, plus its context and graphs
                assert now["spark1"] > 8 and now["spark2"] < 4  # under the guard's default floor
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
