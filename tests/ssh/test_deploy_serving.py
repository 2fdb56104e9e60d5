"""Failures after READY, live: the deployment says it was serving and names a collective timeout."""

from __future__ import annotations

from sparktui.core.deploy import Deployer
from sparktui.core.diagnosis.diagnose import Milestone, Problem
from sparktui.core.state.events import DeploymentChanged, EventBus
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Cluster

from .test_deploy_fakes import Recorder, fake_cluster, plan_for  # noqa: F401 (fixture)

# Real lines from https://github.com/vllm-project/vllm/issues/2734 (tests/corpus/vllm_v0_serving_then_allreduce_timeout.log)
SERVING = (
    "INFO 02-03 13:14:04 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache "
    "usage: 0.0%"
)
TIMEOUT = (
    "(RayWorkerVllm pid=5085) [E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=20518, OpType=ALLREDUCE, NumelIn=106496, NumelOut=106496, Timeout(ms)=1800000) "
    "ran for 1800270 milliseconds before timing out."
)


async def test_a_collective_timeout_while_serving_fails_the_deployment_naming_the_collective_and_rank(fake_cluster):
    fc = await fake_cluster(1)
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="native"))
    head = plan.nodes[0].container
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus)
        try:
            await d.launch(plan)
            fc["n1"].write_log(head, SERVING, TIMEOUT)
            p = await rec.wait_for(lambda e: isinstance(e, Problem) and e.kind == "watchdog_timeout")
            changed = await rec.wait_for(lambda e: isinstance(e, DeploymentChanged) and e.state == "failed")
        finally:
            await d.close()
    assert (p.phase, p.rank) == ("first_request", 4)
    assert "collective timeout on rank 4: an NCCL ALLREDUCE did not finish within 1800 s" in changed.detail
    assert changed.detail.endswith("while serving")


async def test_a_container_that_exits_after_serving_says_it_was_serving(fake_cluster):
    fc = await fake_cluster(1)
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="native"))
    head = plan.nodes[0].container
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus)
        try:
            await d.launch(plan)
            fc["n1"].write_log(head, SERVING)
            await rec.wait_for(lambda e: isinstance(e, Milestone) and e.kind == "ready")  # the log shows it serving
            fc["n1"].set_state(head, "exited", 1)
            changed = await rec.wait_for(lambda e: isinstance(e, DeploymentChanged) and e.state == "failed")
        finally:
            await d.close()
    assert changed.detail.endswith("exited with code 1 while serving")
