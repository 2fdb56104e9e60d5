"""A CPU build of vLLM is planned as one: read from the image's release, never a flag alone."""

from __future__ import annotations

import pytest

from sparktui.core.engines.cpubuild import KV_ENV, is_cpu_build, kv_env

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
