"""What stays on each node once the engine has loaded and taken its KV cache, against memory.floor, and the
allocator setting the plan adds where the engine's KV cache comes from PyTorch's caching allocator."""

from __future__ import annotations

import re

from sparktui.core.engines.base import ALLOC_CONF
from sparktui.core.nodes.facts import Gpu, Memory, NodeFacts
from sparktui.core.plan.fit import FRAGMENTATION, GIB, HOST_RESERVE, RUNTIME_OVERHEAD, after_load, gib, kv_bytes_arg
from sparktui.core.plan.plan import PlanOptions, make_plan

from tests.unit.test_plan import cluster


def _plan(engine="vllm", mems=(128 * GIB, 128 * GIB), floor=None, env=None, docker_env=None, **opts):
    config, facts, subnets = cluster(len(mems), model_bytes=40 * GIB)
    for f, mem in zip(facts.values(), mems):
        f.memory = Memory(total_bytes=mem, available_bytes=mem, free_bytes=mem, cached_bytes=0)
    if floor is not None:
        config.memory.floor = floor
    config.docker.env.update(docker_env or {})
    plan = make_plan(config, facts, subnets, PlanOptions(engine=engine, env=dict(env or {}), **opts))
    return plan, facts


def _after(plan) -> list[str]:
    return [w for w in plan.warnings if w.startswith("after load:")]


def _fraction_change(msg: str) -> tuple[float, float]:
    m = re.search(r"--gpu-memory-utilization (\d\.\d\d) -> (\d\.\d\d)", msg)
    assert m, msg
    return float(m.group(1)), float(m.group(2))


def test_a_fraction_that_leaves_less_than_the_floor_warns_per_node_with_the_numbers():
    plan, facts = _plan(mem_fraction=0.9)
    rooms = {r.node: r for r in plan.after_load}
    assert set(rooms) == {"spark1", "spark2"} and all(r.short for r in rooms.values())
    warnings = _after(plan)
    assert len(warnings) == 2
    for name, w in zip(("spark1", "spark2"), warnings):
        r = rooms[name]
        assert r.left == 128 * GIB - int(0.9 * 128 * GIB) - HOST_RESERVE  # expandable segments on: no fragmentation
        assert w.startswith(f"after load: {name}:") and gib(r.left) in w and gib(r.floor) in w and "floor" in w
        old, new = _fraction_change(w)
        assert old == 0.9 and new < old
        # the suggestion leaves the floor, and is the largest two-decimal fraction that does
        ok = after_load(facts, [name], engine="vllm", fraction=new, floor="4GiB", expandable=True)[0]
        over = after_load(facts, [name], engine="vllm", fraction=round(new + 0.01, 2), floor="4GiB", expandable=True)[0]
        assert not ok.short and over.short


def test_a_plan_that_leaves_enough_does_not_warn():
    plan, _ = _plan(mem_fraction=0.8)
    assert plan.after_load and not any(r.short for r in plan.after_load)
    assert not _after(plan)


def test_a_small_node_beside_a_big_one_gets_its_own_answer():
    plan, facts = _plan(mem_fraction=0.8, mems=(128 * GIB, 64 * GIB))
    rooms = {r.node: r for r in plan.after_load}
    assert not rooms["spark1"].short and rooms["spark2"].short
    [w] = _after(plan)
    assert "spark2" in w and "spark1" not in w
    assert gib(64 * GIB) in w and gib(rooms["spark2"].left) in w
    _, new = _fraction_change(w)
    assert not after_load(facts, ["spark2"], engine="vllm", fraction=new, floor="4GiB", expandable=True)[0].short


def test_a_share_floor_is_taken_of_each_nodes_own_memtotal():
    plan, _ = _plan(mem_fraction=0.8, mems=(128 * GIB, 64 * GIB), floor="5%")
    rooms = {r.node: r for r in plan.after_load}
    assert rooms["spark1"].floor == int(128 * GIB * 0.05) and rooms["spark2"].floor == int(64 * GIB * 0.05)


def test_sglang_holds_its_activations_outside_the_fraction():
    plan, _ = _plan(engine="sglang", mem_fraction=0.8)
    r = plan.after_load[0]
    assert r.held == int(0.8 * 128 * GIB) + RUNTIME_OVERHEAD


def test_trtllm_fraction_is_of_what_the_weights_leave_and_its_suggestion_holds():
    plan, facts = _plan(engine="trtllm", mem_fraction=0.99)
    w = plan.fit.weights_per_gpu
    r = plan.after_load[0]
    free = 128 * GIB - HOST_RESERVE - w - RUNTIME_OVERHEAD  # no fragmentation: not PyTorch's allocator
    assert r.held == w + RUNTIME_OVERHEAD + int(0.99 * free) and r.short
    assert "--kv_cache_free_gpu_memory_fraction 0.99 -> " in _after(plan)[0]
    assert not after_load(facts, ["spark1"], engine="trtllm", fraction=r.suggest, floor="4GiB", weights_per_gpu=w)[
        0
    ].short


def test_a_kv_cache_given_in_bytes_replaces_the_fraction_and_the_fix_names_a_size():
    plan, facts = _plan(mem_fraction=0.5, extra_args=["--kv-cache-memory-bytes", "100G"])
    w = plan.fit.weights_per_gpu
    r = plan.after_load[0]
    assert r.kv_bytes == 100 * GIB and r.held == w + RUNTIME_OVERHEAD + 100 * GIB and r.short
    assert "--kv-cache-memory-bytes 100.0 GiB -> " in _after(plan)[0]
    fixed = after_load(
        facts,
        ["spark1"],
        engine="vllm",
        fraction=0.5,
        floor="4GiB",
        weights_per_gpu=w,
        expandable=True,
        extra_args=[f"--kv-cache-memory-bytes={r.kv_suggest}"],
    )[0]
    assert not fixed.short
    assert kv_bytes_arg(["--kv-cache-memory-bytes=2g"], "--kv-cache-memory-bytes") == 2 * 1000**3


def test_cpu_only_nodes_count_against_system_memory_and_discrete_gpus_do_not():
    cpu = NodeFacts("cpu", "h", reachable=True, memory=Memory(total_bytes=64 * GIB))
    h100 = NodeFacts(
        "h100",
        "h",
        reachable=True,
        gpu=Gpu("H100", 1, memory_total_bytes=80 * GIB),
        memory=Memory(total_bytes=512 * GIB),
    )
    rooms = after_load({"cpu": cpu, "h100": h100}, ["cpu", "h100"], engine="vllm", fraction=0.9, floor="4GiB")
    assert [r.node for r in rooms] == ["cpu"] and rooms[0].short


def test_an_engine_with_its_own_kv_pool_counts_no_fragmentation():
    plan, _ = _plan(engine="trtllm")
    assert plan.after_load[0].reserve == HOST_RESERVE


def test_without_expandable_segments_the_reserved_blocks_count():
    plan, _ = _plan(extra_args=["--enable-sleep-mode"])
    # without them PyTorch's reserved-but-unused blocks stay: the floor check counts them and names the way back
    assert plan.after_load[0].reserve == HOST_RESERVE + FRAGMENTATION
    plan, _ = _plan(extra_args=["--enable-sleep-mode"], mem_fraction=0.85)
    assert "expandable_segments:True" in _after(plan)[0]


def test_a_users_own_setting_decides_what_is_counted():
    for where in ("docker_env", "env"):
        plan, _ = _plan(**{where: {ALLOC_CONF: "max_split_size_mb:512"}})
        assert plan.after_load[0].reserve == HOST_RESERVE + FRAGMENTATION  # theirs has no expandable segments
    plan, _ = _plan(docker_env={"PYTORCH_ALLOC_CONF": "expandable_segments:True"})
    assert plan.after_load[0].reserve == HOST_RESERVE
