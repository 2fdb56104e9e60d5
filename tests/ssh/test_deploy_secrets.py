"""Secrets reach the engine through its environment (an env file docker reads), never a command line."""

from __future__ import annotations

from sparktui.core.deploy import Deployer
from sparktui.core.state.events import EventBus
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Cluster

from .test_deploy_fakes import fake_cluster, plan_for  # noqa: F401 (fixture)

KEY = "sk-test key 'quoted' 0042"
TOKEN = "hf_test_token_0123456789"


async def test_vllm_gets_its_key_and_token_from_an_env_file_and_no_argv_holds_them(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(
        fc.config, PlanOptions(engine="vllm", mode="ray", extra_args=["--api-key", KEY], env={"HF_TOKEN": TOKEN})
    )
    assert plan.ok, plan.errors
    for step in plan.steps:  # the line the node's shell gets as its argv
        assert KEY not in step.command and TOKEN not in step.command, step.command
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus(), wait_interval=0.1)
        try:
            await d.launch(plan)
        finally:
            await d.close()
    calls = fc.calls()
    assert any(a[0] == "run" for _, a in calls) and any(a[:2] == ["exec", "-d"] for _, a in calls)
    for node, argv in calls:  # every docker argv on every node, the serving `sh -c` line included
        line = " ".join(argv)
        assert KEY not in line and TOKEN not in line and "--api-key" not in line, (node, line)
    head = next(c for c in fc["n1"].names() if c.startswith("sparktui-lab-"))
    env = fc["n1"].meta(head)["env"]
    assert f"VLLM_API_KEY={KEY}" in env and f"HF_TOKEN={TOKEN}" in env  # what vLLM reads instead
    for n in ("n1", "n2"):  # the env files went once docker had read them
        assert not list((fc[n].dir.parent / ".local/state/sparktui/env").iterdir())


async def test_a_secret_an_engine_reads_only_from_its_command_line_is_refused(fake_cluster):
    fc = await fake_cluster(1)
    plan = plan_for(fc.config, PlanOptions(engine="sglang", extra_args=["--api-key", KEY]))
    assert any("SGLang reads its API key only from --api-key" in e and "`ps`" in e for e in plan.errors), plan.errors
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray", extra_args=[f"--hf-token={TOKEN}"]))
    assert any("the secret flag --hf-token," in e and "--env NAME=VALUE" in e for e in plan.errors), plan.errors
