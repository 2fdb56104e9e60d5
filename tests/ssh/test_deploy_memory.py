"""The memory guard during a launch, against in-process nodes whose meminfo is a file of the test's own."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.cli.deploy import deployments_section
from sparktui.core.deploy import Deployer, stopmark
from sparktui.core.diagnosis.diagnose import Problem
from sparktui.core.state.events import EventBus, NodeMemory
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Cluster

from tests.simhelpers import free_port

from .test_deploy_fakes import Recorder, fake_cluster, plan_for  # noqa: F401 (fixture)

PSI = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


def meminfo(avail_gib: float) -> str:
    return f"MemTotal: {128 * 2**20} kB\nMemAvailable: {int(avail_gib * 2**20)} kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n"


@pytest.fixture
def files(tmp_path):
    """node -> (meminfo, pressure) files, both nodes starting with plenty to spare."""
    out = {}
    for n in ("n1", "n2"):
        (tmp_path / f"{n}-meminfo").write_text(meminfo(100))
        (tmp_path / f"{n}-pressure").write_text(PSI)
        out[n] = (str(tmp_path / f"{n}-meminfo"), str(tmp_path / f"{n}-pressure"))
    return out


def ours(fc, node: str) -> list[str]:
    return [c for c in fc[node].names() if c.startswith("sparktui-lab-")]


async def test_a_node_under_the_floor_stops_this_deployment_everywhere_and_leaves_it_failed(
    fake_cluster, files, tmp_path
):
    fc = await fake_cluster(2)
    fc.config.memory.interval = 0.05
    for n in ("n1", "n2"):
        fc[n].add_container("user-db", {})
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, mem_files=files)
        try:
            await d.launch(plan)
            assert all(ours(fc, n) for n in ("n1", "n2"))
            await rec.wait_for(lambda e: isinstance(e, NodeMemory) and e.sample.node == "n2" and e.level == "ok")
            (tmp_path / "n2-meminfo").write_text(meminfo(3.0))  # the weights land: 3 GiB left, under 4 GiB
            assert await d.wait(20, until=("failed",)) == "failed"
            assert "memory floor on n2: 3.0 GiB available" in d.current.detail
            assert fc["n1"].names() == fc["n2"].names() == ["user-db"]  # ours went on every node, nothing else
            p = next(p for p in rec.of(Problem) if p.kind == "memory_floor")
            # the plan already set the allocator for SGLang: the advice goes on to what is left to change
            assert plan.expandable and p.node == "n2" and "PYTORCH_CUDA_ALLOC_CONF" not in p.hint
            assert "--mem-fraction-static from" in p.hint
            assert d.memory["n2"].level == "stop"
            watch = [t for t in asyncio.all_tasks() if t.get_name() == "sparktui-deploy-memory"]
            if watch:  # the watch ends with the stop, on its own
                await asyncio.wait(watch, timeout=10)
            assert all(t.done() for t in watch)
            # `status` from another process: no container is left, yet it says what stopped it
            rows = await deployments_section(cluster, fc.config)
            [row] = [r for r in rows if r.get("name") == "lab"]
            assert row["state"] == "failed" and row["stopped_by"] == "memory guard"
            assert row["reason"].startswith("memory floor on n2: 3.0 GiB available") and row["containers"] == []
            await d.stop()  # asked for: the guard's line goes with it
            assert await stopmark.guarded(cluster["n1"]) == []
        finally:
            await d.close()


async def test_a_reading_that_fails_stops_nothing(fake_cluster, files, tmp_path):
    fc = await fake_cluster(2)
    fc.config.memory.interval = 0.05
    files["n2"] = (str(tmp_path / "gone"), files["n2"][1])
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, mem_files=files)
        try:
            await d.launch(plan)
            unwatched = lambda e: isinstance(e, NodeMemory) and e.sample.node == "n2" and e.level == "unwatched"  # noqa: E731
            await rec.wait_for(unwatched)
            first = rec.events.index(next(e for e in rec.events if unwatched(e)))
            await rec.wait_for(lambda e: unwatched(e) and rec.events.index(e) > first + 4)
            assert d.current.state not in ("failed", "stopping", "stopped")
            assert all(ours(fc, n) for n in ("n1", "n2"))
            assert not [argv for _, argv in fc.calls() if argv[0] in ("stop", "rm")]
            said = [e.detail for e in rec.of(NodeMemory) if unwatched(e) and e.detail]
            assert len(said) == 1 and f"cannot read {tmp_path / 'gone'} on n2" in said[0]
        finally:
            await d.close()


async def test_status_reads_each_nodes_memory_once_for_its_deployments(fake_cluster):
    from sparktui.cli.deploy import deployments_section

    fc = await fake_cluster(2)
    for n in ("n1", "n2"):
        labels = {"sparktui.deployment": "lab", "sparktui.engine": "sglang", "sparktui.rank": n[-1]}
        fc[n].add_container(f"sparktui-lab-sglang-{n}", labels)
    # status asks the head's engine (labelled, as sparktui's containers are) for /health too: a port nothing
    # serves, through a forward the head allows, answers at once; without them the probe waits out its 5 s
    fc.nodes[0].server.forwarding = True
    fc.config.engine.sglang_port = free_port()
    async with Cluster(fc.config) as cluster:
        (d,) = await deployments_section(cluster, fc.config)
    assert set(d["memory"]) == {"n1", "n2"}
    for n, m in d["memory"].items():  # this machine's own /proc, read through the nodes' shells
        assert set(m) == {"available", "total", "swap_used", "psi_full", "level", "detail"}
        assert 0 < m["available"] <= m["total"] and m["level"] in ("ok", "warn", "stop")
        assert f"\n    {n} memory: " in d["summary"]
