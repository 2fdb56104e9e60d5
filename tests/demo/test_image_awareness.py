"""The engine release inside an image decides the plan, and the simulated engine of that release refuses
what the real one refuses: a plan that forgot the version gate fails on the demo cluster too."""

from __future__ import annotations

from sparktui.core.config.config import load_config
from sparktui.core.deploy.operations import Operations
from sparktui.core.state.events import EventBus
from sparktui.core.plan.image import inspect_image
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Cluster, sh

from .conftest import cli_env, sparktui, until  # noqa: F401 - cli_env is a fixture

NVIDIA = "nvcr.io/nvidia/vllm:25.11-py3"  # plays the vLLM 0.11.0 that image ships
OPENAI = "vllm/vllm-openai:v0.33.0"  # ENTRYPOINT ["vllm", "serve"]


async def test_inspection_reads_entrypoint_and_versions_once_per_image(demo):
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        node = cluster["spark1"]
        await node.run("rm -rf ~/.cache/sparktui/images")
        first = await inspect_image(node, NVIDIA)
        assert first.problem is None, first.problem
        assert first.version("vllm") == "0.11.0" and first.has("ray") and not first.cached
        assert first.id and first.id.startswith("sha256:")
        again = await inspect_image(node, NVIDIA)
        assert again.cached and again.versions == first.versions  # no second container
        cache = await node.run("ls ~/.cache/sparktui/images")
        assert cache.stdout.split() == [first.id.replace(":", "_") + ".json"]
        own = await inspect_image(node, OPENAI)
        assert own.entrypoint == ["vllm", "serve"] and own.version("vllm") == "0.33.0"
        gone = await inspect_image(node, "no/such:image")
        assert gone.problem and "not on spark1" in gone.problem


async def test_native_vllm_on_an_image_with_0_11_is_refused_naming_it(demo):
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        ops = Operations(cluster, config, EventBus())
        plan = await ops.plan(PlanOptions(engine="vllm", mode="native", image=NVIDIA))
        assert any("vLLM 0.11.0" in e and "--mode ray" in e for e in plan.errors), plan.errors
        assert plan.engine_version == "0.11.0" and NVIDIA in plan.engine_note
        ok = await ops.plan(PlanOptions(engine="vllm", mode="native", image=OPENAI))
        assert ok.engine_version == "0.33.0" and not [e for e in ok.errors if "vLLM" in e], ok.errors


async def test_plan_cli_names_the_engine_release(demo, cli_env):
    rc, out, err = await sparktui(
        cli_env, "plan", "--config", str(demo.config_path), "--engine", "vllm", "--mode", "native", "--image", NVIDIA
    )
    assert rc == 1, err
    assert "engine vLLM 0.11.0 in " + NVIDIA in out and "no native multi-node mode" in out


async def test_the_simulated_0_11_rejects_native_flags_when_forced(demo):
    """No plan check: the engine itself says what vLLM 0.11.0 says."""
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        node = cluster["spark1"]
        r = await node.run(
            sh(
                "docker",
                "run",
                "--rm",
                "--network",
                "host",
                "--entrypoint",
                "vllm",
                NVIDIA,
                "serve",
                demo.model_path,
                "--nnodes",
                "2",
                "--node-rank",
                "0",
                "--master-addr",
                "127.0.0.1",
            ),
            timeout=60,
        )
        assert r.exit_status == 2
        assert (
            "vllm serve: error: unrecognized arguments: --nnodes 2 --node-rank 0 --master-addr 127.0.0.1"
            in r.stdout + r.stderr
        )


async def test_an_image_entrypoint_runs_with_the_command_as_its_arguments(demo):
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        node = cluster["spark1"]
        # like vllm/vllm-openai: `docker run IMAGE --help` runs `vllm serve --help`
        r = await node.run(sh("docker", "run", "--rm", OPENAI, "--help"), timeout=60)
        assert r.ok and "usage: vllm serve" in r.stdout, r.stdout + r.stderr
        meta = await node.run(sh("docker", "image", "inspect", "--format", "{{json .Config.Entrypoint}}", OPENAI))
        assert meta.stdout.strip() == '["vllm","serve"]'
        # a plan that forgot --entrypoint runs `vllm serve ray start ...`, which the engine refuses
        forgot = await node.run(
            sh("docker", "run", "--rm", OPENAI, "ray", "start", "--head", "--port", "6379"), timeout=60
        )
        assert forgot.exit_status == 2
        assert "vllm serve: error: unrecognized arguments: start" in forgot.stdout + forgot.stderr


async def test_each_demo_image_answers_whether_it_loads_the_model(demo):
    """The support check asks the simulated image: the stock SGLang image (0.5.3.post3) lacks Qwen3.5,
    the vLLM 26.10 image (0.31.0) has it; both load the demo's Qwen3 MoE. Nothing is started."""
    import json
    import shlex

    from sparktui.demo import checkpoint

    config = load_config(demo.config_path)
    qwen35 = config.model.path.rstrip("/") + "-qwen35"
    async with Cluster(config) as cluster:
        node = cluster["spark1"]
        cfg = shlex.quote(json.dumps({**checkpoint.CONFIG, **checkpoint.QWEN35}))
        await node.run(f"mkdir -p {shlex.quote(qwen35)} && printf '%s' {cfg} > {shlex.quote(qwen35)}/config.json")
        ops = Operations(cluster, config, EventBus())
        old = "lmsysorg/sglang:spark"
        plan = await ops.plan(PlanOptions(engine="sglang", image=old, model_path=qwen35))
        assert plan.support["status"] == "unsupported", plan.support
        assert "qwen3_5_moe" in plan.errors[0] and "SGLang 0.5.3.post3" in plan.errors[0]
        plan = await ops.plan(PlanOptions(engine="vllm", image="nvcr.io/nvidia/vllm:26.10-py3", model_path=qwen35))
        assert plan.support["status"] == "supported" and plan.support["engine_version"] == "0.31.0"
        plan = await ops.plan(PlanOptions(engine="sglang", image=old))
        assert plan.support["status"] == "supported" and plan.support["model_type"] == "qwen3_moe"
        ps = await node.run("docker ps -aq")
        assert not ps.stdout.split()
