"""Two launches of one deployment at once on the demo: one runs, the other is refused naming the first."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.core.config.config import load_config
from sparktui.core.deploy import find_all
from sparktui.core.remote.ssh import Cluster
from sparktui.demo.runner import ThreadedDemo

from .conftest import require_namespaces, small, sparktui


@pytest.fixture(scope="module")
def happy(tmp_path_factory):
    """A demo where both engines come up (the default story hangs SGLang on purpose)."""
    require_namespaces()
    runner = ThreadedDemo(small(tmp_path_factory.mktemp("demo"), scenario="happy"))
    yield runner.start()
    runner.stop()


async def engines_running(config_path) -> list[tuple[str, str]]:
    async with Cluster(load_config(config_path)) as cluster:
        found = await find_all(cluster, None)
    return sorted(
        (f.node, c.labels.get("sparktui.engine", ""))
        for f in found.values()
        for c in f.containers
        if c.state == "running"
    )


async def test_two_launches_at_once_run_one_deployment_and_refuse_the_other(happy, cli_env):
    conf = ["--config", str(happy.config_path)]
    rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", timeout=120)
    assert rc == 0, out + err
    launch = [*conf, "launch", "--yes", "--wait", "--engine"]
    vllm, sglang = await asyncio.gather(
        sparktui(cli_env, *launch, "vllm", timeout=240), sparktui(cli_env, *launch, "sglang", timeout=240)
    )
    results = {"vllm": vllm, "sglang": sglang}
    won = [e for e, (rc, _, _) in results.items() if rc == 0]
    assert len(won) == 1, results
    (lost,) = set(results) - set(won)
    rc, out, err = results[lost]
    assert rc == 1 and " is busy: launch by " in err and "(pid " in err and " ago" in err, out + err
    assert "ready" in results[won[0]][1]
    assert await engines_running(happy.config_path) == [("spark1", won[0]), ("spark2", won[0])]
    rc, out, err = await sparktui(cli_env, *conf, "stop", "--yes", timeout=120)
    assert rc == 0, out + err
