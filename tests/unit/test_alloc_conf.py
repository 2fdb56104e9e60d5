"""PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: added where the engine's KV cache comes from PyTorch's caching
allocator, never where its own allocator refuses it or a user set their own, and said why in the plan's notes."""

from __future__ import annotations

from sparktui.core.engines.base import ALLOC_CONF, EXPANDABLE
from sparktui.core.plan.plan import PlanOptions, make_plan

from tests.unit.test_plan import cluster


def _plan(engine="vllm", env=None, docker_env=None, **opts):
    config, facts, subnets = cluster(2)
    config.docker.env.update(docker_env or {})
    return make_plan(config, facts, subnets, PlanOptions(engine=engine, env=dict(env or {}), **opts))


def test_the_env_is_added_where_the_engine_allocates_through_pytorch():
    for engine in ("vllm", "sglang"):
        plan = _plan(engine=engine)
        assert all(n.env.get(ALLOC_CONF) == EXPANDABLE for n in plan.nodes), engine
        assert any(ALLOC_CONF in n and "PyTorch" in n for n in plan.notes)
        assert any(f"-e {ALLOC_CONF}={EXPANDABLE}" in c for c in plan.nodes[0].commands), engine


def test_not_for_an_engine_with_its_own_kv_pool():
    plan = _plan(engine="trtllm")
    assert not any(ALLOC_CONF in n.env for n in plan.nodes)
    assert any("TensorRT-LLM" in n and "not set" in n for n in plan.notes)


def test_not_where_the_engines_own_allocator_refuses_it():
    plan = _plan(extra_args=["--enable-sleep-mode"])
    assert not any(ALLOC_CONF in n.env for n in plan.nodes)
    assert any("sleep" in n for n in plan.notes)
    plan = _plan(engine="sglang", extra_args=["--enable-memory-saver"])
    assert not any(ALLOC_CONF in n.env for n in plan.nodes)


def test_a_users_own_setting_wins_from_config_or_command_line():
    for where in ("docker_env", "env"):
        plan = _plan(**{where: {ALLOC_CONF: "max_split_size_mb:512"}})
        assert all(n.env[ALLOC_CONF] == "max_split_size_mb:512" for n in plan.nodes)
        assert any("max_split_size_mb:512" in n and "yours" in n for n in plan.notes)
    plan = _plan(docker_env={"PYTORCH_ALLOC_CONF": "expandable_segments:True"})
    assert not any(ALLOC_CONF in n.env for n in plan.nodes)  # torch reads this one first: theirs
