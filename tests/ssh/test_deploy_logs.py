"""Log following across a dropped SSH connection, and the hang watchdog, against stand-in nodes."""

from __future__ import annotations

from sparktui.core.deploy import Deployer
from sparktui.core.diagnosis.diagnose import Problem, ProblemCleared
from sparktui.core.state.events import DeploymentChanged, EventBus, LogLines
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Cluster

from .test_deploy_fakes import Recorder, fake_cluster, now_ts, plan_for  # noqa: F401 (fixture)


def lines_of(rec: Recorder, container: str) -> list[str]:
    return [ln for e in rec.of(LogLines) if e.source == container for ln in e.lines]


async def test_log_resumes_after_a_dropped_connection_without_losing_or_doubling_a_line(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    head = plan.nodes[0].container
    node = fc["n1"]
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus)
        try:
            await d.launch(plan)
            sent = [f"line {i:03d}" for i in range(40)]
            node.write_log(head, *sent)
            # lines sharing one timestamp at the resume point: --since sends them again
            stamp = now_ts()
            sent += node.write_log(head, "same-ts a", "same-ts b", ts=stamp)
            await rec.wait_for(lambda e: isinstance(e, LogLines) and "same-ts b" in e.lines)
            passes = d.followers[("n1", head)].passes
            node.server.drop_connections()
            # written while the link is down; one more line at the very same instant as the boundary
            sent += node.write_log(head, "same-ts c", ts=stamp)
            sent += node.write_log(head, *[f"after {i:03d}" for i in range(30)])
            await rec.wait_for(lambda e: isinstance(e, LogLines) and "after 029" in e.lines, timeout=20)
            assert d.followers[("n1", head)].passes > passes  # it really resumed
        finally:
            await d.close()
    got = [ln for ln in lines_of(rec, head) if not ln.startswith("fake: ")]
    assert got == sent


async def test_follower_reads_to_the_end_once_the_container_exits(fake_cluster):
    fc = await fake_cluster(1)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    head = plan.nodes[0].container
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus)
        try:
            await d.launch(plan)
            fc["n1"].write_log(head, "last words")
            fc["n1"].set_state(head, "exited", 137)
            changed = await rec.wait_for(lambda e: isinstance(e, DeploymentChanged) and e.state == "failed")
        finally:
            await d.close()
    assert "exited with code 137" in changed.detail
    assert "last words" in lines_of(rec, head)


async def test_silence_inside_distributed_init_is_flagged_as_a_hang_with_the_sglang_hint(fake_cluster):
    fc = await fake_cluster(2, hang_after=0.6)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus)
        try:
            await d.launch(plan)
            for n in plan.nodes:
                fc[n.name].write_log(
                    n.container,
                    "[2026-01-01 00:00:00 TP0] Init torch distributed begin.",
                    "[2026-01-01 00:00:00 TP0] CustomAllreduce is disabled because this process "
                    "group spans across nodes.",
                )
            hang = await rec.wait_for(lambda e: isinstance(e, Problem) and e.kind == "rendezvous_hang")
            await rec.wait_for(lambda e: isinstance(e, DeploymentChanged) and e.state == "hung")
            assert d.current.state == "hung" and d.current.detail.startswith(f"rendezvous hang on {hang.node}")
            # a late "ends" proves the suspicion wrong: the problem is withdrawn and the state moves on
            fc[hang.node].write_log(
                plan.nodes[0].container if hang.node == "n1" else plan.nodes[1].container,
                "[2026-01-01 00:00:09 TP0] Init torch distributed ends. mem usage=0.30 GB",
            )
            await rec.wait_for(lambda e: isinstance(e, ProblemCleared) and e.problem.node == hang.node)
        finally:
            await d.close()
    assert "SGLANG_HOST_IP" in hang.hint and "spans across nodes" in hang.message


async def test_busy_logs_are_not_a_hang(fake_cluster):
    fc = await fake_cluster(1, hang_after=0.5)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    head = plan.nodes[0].container
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus)
        try:
            await d.launch(plan)
            fc["n1"].write_log(head, "[2026-01-01 00:00:00 TP0] Init torch distributed begin.")
            fc["n1"].write_log(head, "[2026-01-01 00:00:00 TP0] Init torch distributed ends. mem usage=0.30 GB")
            await rec.wait_for(lambda e: isinstance(e, LogLines) and any("ends" in ln for ln in e.lines))
            # ticks keep coming; wait for several tick periods of silence after init ended
            await d.wait(1.5, until=("hung", "failed"))
        finally:
            await d.close()
    assert not [p for p in rec.of(Problem) if p.kind == "rendezvous_hang"]
