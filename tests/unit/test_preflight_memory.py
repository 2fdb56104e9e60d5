"""The preflight reads each node's /proc/meminfo itself (in-process SSH nodes on this machine, so the
numbers are this machine's) and fails a node whose free memory is below what the engine will ask for."""

from __future__ import annotations

from pathlib import Path

from sparktui.core.preflight import run_preflight
from sparktui.core.remote.ssh import Cluster

from .test_preflight_run import docker_calls, leftovers, make_plan, nodes  # noqa: F401 - the fixture


def meminfo_kb() -> dict[str, int]:
    return {ln.split(":")[0]: int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()}


async def test_a_fraction_no_node_can_give_fails_on_memory_after_the_rendezvous_ran(nodes):  # noqa: F811
    config, state = await nodes()
    plan = make_plan()
    plan.unified, plan.mem_fraction = ["node1", "node2"], 0.999  # nobody has 99.9 % of memory free
    async with Cluster(config) as cluster:
        v = await run_preflight(cluster, config, plan, timeout=10)
    assert not v.ok and {r.kind for r in v.nodes.values()} == {"memory"}
    assert all(r.transport == "tcp" for r in v.nodes.values())  # the rendezvous itself was checked too
    assert len([c for c in docker_calls(state) if c["args"][0] == "run"]) == 2
    kb = meminfo_kb()
    for r in v.nodes.values():
        m = r.memory
        assert m.total == kb["MemTotal"] * 1024 and m.need == int(m.total * 0.999)
        assert 0 < m.free < m.need and m.cached > 0
        assert (r.node in v.droppable) == (m.free + m.cached >= m.need)
    assert "would refuse to start" in v.reason
    assert leftovers(state) == []


async def test_a_fraction_that_fits_passes_with_the_memory_on_each_row(nodes):  # noqa: F811
    config, _ = await nodes()
    plan = make_plan()
    plan.unified, plan.mem_fraction = ["node2"], 0.001
    async with Cluster(config) as cluster:
        v = await run_preflight(cluster, config, plan, timeout=10)
    assert v.ok, v.summary()
    assert v.nodes["node1"].memory is None  # a discrete GPU: host memory is not what it allocates from
    assert not v.nodes["node2"].memory.short and "memory ok" in v.summary()
