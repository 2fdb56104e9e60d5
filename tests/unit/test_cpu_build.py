"""A CPU build of vLLM is planned as one: read from the image's release, never a flag alone."""

from __future__ import annotations

import pytest

from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.engines.cpubuild import KV_ENV, is_cpu_build, kv_env
from sparktui.core.plan.plan import PlanOptions, make_plan

from .test_plan import parse_run, plan_for


@pytest.mark.parametrize(
    "version,cpu",
    [
        ("0.32.0+cpu", True),
        ("0.32.0+CPU", True),
        ("0.11.0+cpu.avx512", True),
        ("0.32.0", False),
        ("0.32.0+cu130", False),
        (None, False),
        ("cpu", False),
    ],
)
def test_a_cpu_build_is_named_by_the_release_local_label(version, cpu):
    assert is_cpu_build(version) is cpu


def test_the_kv_cache_is_sized_in_gib_unless_the_arguments_size_it_in_bytes():
    assert kv_env([], "--kv-cache-memory-bytes") == {KV_ENV: "1"}
    assert kv_env(["--kv-cache-memory-bytes", "4G"], "--kv-cache-memory-bytes") == {}
    assert kv_env(["--kv-cache-memory-bytes=4G"], "--kv-cache-memory-bytes") == {}


def test_a_cpu_build_gets_no_gpu_no_memory_fraction_and_a_kv_cache_in_gib():
    plan, _ = plan_for(2, engine="vllm", mode="native", engine_version="0.32.0+cpu")
    assert plan.ok, plan.errors
    steps = [s for s in plan.steps if s.kind == "run"]
    assert len(steps) == 2
    for step in steps:
        run = parse_run(step.argv)
        assert "--gpus" not in step.argv and "--runtime" not in step.argv
        assert "--gpu-memory-utilization" not in run["cmd"]
        assert run["env"][KV_ENV] == "1" and "PYTORCH_CUDA_ALLOC_CONF" not in run["env"]
    assert plan.fit is None and plan.unified == []  # a GPU fit and the GPU's free-memory checks don't apply
    assert any(n.startswith("CPU build of the engine (0.32.0+cpu)") and "host's memory" in n for n in plan.notes)


def test_the_same_release_built_for_gpus_keeps_its_gpu_plan():
    plan, _ = plan_for(2, engine="vllm", mode="native", engine_version="0.32.0")
    step = next(s for s in plan.steps if s.kind == "run")
    run = parse_run(step.argv)
    assert "--gpus" in step.argv and "--gpu-memory-utilization" in run["cmd"] and KV_ENV not in run["env"]
    assert plan.fit is not None


# what vLLM's Ray executor printed on the lab once both nodes had joined (tests/corpus/vllm_cpu_ray_tp2_refused.log)
RAY_REFUSED = (
    "(EngineCore pid=261) ERROR 12-06 13:17:08 [core.py:1510] ValueError: current platform cpu does not support ray."
)


def test_ray_mode_on_a_cpu_build_is_refused_at_the_plan_naming_native():
    plan, _ = plan_for(2, engine="vllm", mode="ray", engine_version="0.32.0+cpu")
    assert not plan.ok
    [why] = [e for e in plan.errors if "Ray" in e]
    assert "0.32.0+cpu" in why and why.endswith("use --mode native") and "\n" not in why
    # the same release built for GPUs keeps its Ray mode
    plan, _ = plan_for(2, engine="vllm", mode="ray", engine_version="0.32.0")
    assert plan.ok, plan.errors


def test_a_cpu_build_defaults_to_native_even_with_ray_in_its_image():
    from sparktui.core.plan.image import ImageInfo

    from .test_fabric import make_config, make_facts, node_name, subnets
    from .test_plan import VLLM_IMAGE

    facts = {node_name(i): make_facts(i) for i in range(2)}
    facts["spark1"].images[VLLM_IMAGE] = ImageInfo(
        VLLM_IMAGE, "spark1", id="sha256:" + "cd" * 32, versions={"vllm": "0.32.0+cpu", "ray": "2.60.0", "sglang": None}
    )
    plan = make_plan(make_config(2), facts, subnets(list(facts.values())), PlanOptions(engine="vllm"))
    assert plan.mode == "native" and plan.ok, plan.errors
    assert "CPU build" in plan.engine_note


def test_the_ray_executors_refusal_is_named_with_the_way_out():
    d = Diagnoser("vllm")
    d.feed_lines([RAY_REFUSED])
    [p] = d.ordered_problems()
    assert p.kind == "ray_unsupported" and "cpu" in p.message and "--mode native" in p.hint
