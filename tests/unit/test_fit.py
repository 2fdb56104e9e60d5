"""Fit estimate around its boundaries: weights vs budget, and the 10 % headroom line."""
from __future__ import annotations

from sparktui.core.facts import Gpu, Memory, NodeFacts
from sparktui.core.fit import GIB, LOW_HEADROOM, RUNTIME_OVERHEAD, estimate_fit, fit_from_facts

MEM = 100 * GIB  # round numbers keep the boundaries exact


def test_weights_exactly_at_budget_fit_but_leave_no_kv():
    f = estimate_fit(2 * 80 * GIB, {"a": MEM, "b": MEM}, tp=2, pp=1, mem_fraction=0.8)
    assert f.weights_per_gpu == 80 * GIB and f.budget_per_gpu == 80 * GIB
    assert not f.errors
    assert f.headroom_bytes == -RUNTIME_OVERHEAD
    assert any("no room left for the KV cache" in w for w in f.warnings)


def test_one_byte_over_budget_is_an_error():
    f = estimate_fit(2 * 80 * GIB + 2, {"a": MEM, "b": MEM}, tp=2, pp=1, mem_fraction=0.8)
    assert f.weights_per_gpu == 80 * GIB + 1
    assert len(f.errors) == 1 and "do not fit" in f.errors[0]
    assert not f.ok


def test_headroom_at_ten_percent_is_fine_just_below_warns():
    # budget 80 GiB, overhead 3 GiB: weights of 67 GiB leave exactly 10 GiB = 10 % of 100 GiB
    at = estimate_fit(67 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.8)
    assert at.headroom_bytes == int(LOW_HEADROOM * MEM) and at.ok and not at.warnings
    below = estimate_fit(67 * GIB + 1, {"a": MEM}, tp=1, pp=1, mem_fraction=0.8)
    assert below.ok and any("little KV cache headroom" in w for w in below.warnings)


def test_pipeline_stages_divide_weights_too_and_round_up():
    f = estimate_fit(10 * GIB + 1, {"a": MEM, "b": MEM, "c": MEM, "d": MEM}, tp=2, pp=2, mem_fraction=0.5)
    assert f.weights_per_gpu * 4 >= 10 * GIB + 1 > (f.weights_per_gpu - 1) * 4


def test_tightest_node_decides():
    f = estimate_fit(100 * GIB, {"big": 128 * GIB, "small": 96 * GIB}, tp=2, pp=1, mem_fraction=0.9)
    assert f.tightest_node == "small" and f.memory_per_gpu == 96 * GIB
    assert f.budget_per_gpu == int(96 * GIB * 0.9)


def test_unknown_sizes_give_unknown_not_errors():
    f = estimate_fit(None, {"a": MEM}, tp=1, pp=1, mem_fraction=0.8)
    assert not f.known and f.ok and any("checkpoint size unknown" in w for w in f.warnings)
    f = estimate_fit(10 * GIB, {"a": None, "b": MEM}, tp=2, pp=1, mem_fraction=0.8)
    assert any("unknown on a" in w for w in f.warnings)
    assert f.memory_per_gpu == MEM  # b still bounds it
    f = estimate_fit(10 * GIB, {"a": None}, tp=1, pp=1, mem_fraction=0.8)
    assert not f.known and f.headroom_ratio is None


def test_from_facts_uses_unified_memory_on_gb10():
    gb10 = NodeFacts("s1", "h", reachable=True, gpu=Gpu("NVIDIA GB10", 1, None, unified=True),
                     memory=Memory(total_bytes=119 * GIB, available_bytes=110 * GIB))
    h200 = NodeFacts("s2", "h", reachable=True, gpu=Gpu("H200", 1, memory_total_bytes=141 * GIB),
                     memory=Memory(total_bytes=1000 * GIB))
    f = fit_from_facts({"s1": gb10, "s2": h200}, ["s1", "s2"], 118 * GIB, 2, 1, 0.85)
    assert f.memory_per_gpu == 119 * GIB and f.tightest_node == "s1"
    assert f.weights_per_gpu == 59 * GIB
    assert f.headroom_bytes == int(119 * GIB * 0.85) - 59 * GIB - RUNTIME_OVERHEAD


def test_json_shape():
    j = estimate_fit(10 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.8).to_json()
    for k in ("weights_per_gpu", "memory_per_gpu", "budget_per_gpu", "overhead_bytes", "headroom_bytes",
              "headroom_ratio", "known", "ok", "warnings", "errors", "tp", "pp", "mem_fraction"):
        assert k in j
    assert j["known"] and j["ok"]


def test_small_sizes_read_in_mib_not_as_zero_gib():
    from sparktui.core.fit import GIB, gib

    assert gib(5 << 20) == "5.0 MiB"
    assert gib(GIB // 2) == "0.5 GiB"
    assert gib(None) == "?"
