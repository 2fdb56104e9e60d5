"""Fit estimate around its boundaries: weights vs budget, the 10 % headroom line, parameters every GPU holds
whole, and what each engine's fraction covers (vLLM's --gpu-memory-utilization: the whole instance;
SGLang's --mem-fraction-static: weights + KV pool, activations outside)."""

from __future__ import annotations

from sparktui.core.nodes.facts import Gpu, Memory, NodeFacts
from sparktui.core.plan.fit import GIB, LOW_HEADROOM, RUNTIME_OVERHEAD, estimate_fit, fit_from_facts, replicated_params

MEM = 100 * GIB  # round numbers keep the boundaries exact
EVEN = (0, "none")  # nothing replicated: the boundaries below are exact


def test_weights_exactly_at_budget_fit_but_leave_no_kv():
    f = estimate_fit(2 * 80 * GIB, {"a": MEM, "b": MEM}, tp=2, pp=1, mem_fraction=0.8, replicated=EVEN)
    assert f.weights_per_gpu == 80 * GIB and f.budget_per_gpu == 80 * GIB
    assert not f.errors
    assert f.headroom_bytes == -RUNTIME_OVERHEAD
    assert any("no room left for the KV cache" in w for w in f.warnings)


def test_one_byte_over_budget_is_an_error():
    f = estimate_fit(2 * 80 * GIB + 2, {"a": MEM, "b": MEM}, tp=2, pp=1, mem_fraction=0.8, replicated=EVEN)
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
    f = estimate_fit(
        10 * GIB + 1, {"a": MEM, "b": MEM, "c": MEM, "d": MEM}, tp=2, pp=2, mem_fraction=0.5, replicated=EVEN
    )
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
    gb10 = NodeFacts(
        "s1",
        "h",
        reachable=True,
        gpu=Gpu("NVIDIA GB10", 1, None, unified=True),
        memory=Memory(total_bytes=119 * GIB, available_bytes=110 * GIB),
    )
    h200 = NodeFacts(
        "s2",
        "h",
        reachable=True,
        gpu=Gpu("H200", 1, memory_total_bytes=141 * GIB),
        memory=Memory(total_bytes=1000 * GIB),
    )
    f = fit_from_facts({"s1": gb10, "s2": h200}, ["s1", "s2"], 118 * GIB, 2, 1, 0.85)
    assert f.memory_per_gpu == 119 * GIB and f.tightest_node == "s1"
    assert f.weights_per_gpu == 59 * GIB + int(59 * GIB * 0.03)  # no config.json: the 3 % allowance
    assert f.headroom_bytes == int(119 * GIB * 0.85) - f.weights_per_gpu - RUNTIME_OVERHEAD


def test_json_shape():
    j = estimate_fit(10 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.8).to_json()
    for k in (
        "weights_per_gpu",
        "memory_per_gpu",
        "budget_per_gpu",
        "overhead_bytes",
        "headroom_bytes",
        "headroom_ratio",
        "known",
        "ok",
        "warnings",
        "errors",
        "tp",
        "pp",
        "mem_fraction",
    ):
        assert k in j
    assert j["known"] and j["ok"]


def test_small_sizes_read_in_mib_not_as_zero_gib():
    from sparktui.core.plan.fit import GIB, gib

    assert gib(5 << 20) == "5.0 MiB"
    assert gib(GIB // 2) == "0.5 GiB"
    assert gib(None) == "?"


# Shaped like Qwen3.5-122B-A10B's config.json: a multimodal wrapper with the text model inside.
MOE_CONFIG = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "tie_word_embeddings": False,
    "text_config": {
        "hidden_size": 3072,
        "num_hidden_layers": 48,
        "vocab_size": 248320,
        "num_experts": 256,
        "shared_expert_intermediate_size": 1024,
        "torch_dtype": "bfloat16",
    },
}


def test_replicated_parameters_are_counted_from_config_json():
    size, what = replicated_params(MOE_CONFIG, "vllm")
    norms = (2 * 48 + 1) * 3072
    router = 48 * (256 * 3072 + 3072)  # per layer: the router and the shared-expert gate
    assert size == 2 * (norms + router) and what == "norms + router"
    f = estimate_fit(118 * GIB, {"a": MEM, "b": MEM}, tp=2, pp=1, mem_fraction=0.8, replicated=(size, what))
    assert f.weights_per_gpu == -(-(118 * GIB - size) // 2) + size  # whole on each GPU, the rest split
    assert f.replicated_bytes == f.weights_per_gpu - 59 * GIB
    dense = replicated_params({"hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 128256}, "vllm")
    assert dense == (2 * (2 * 32 + 1) * 4096, "norms")
    assert replicated_params({"architectures": ["x"]}, "vllm")[0] == 0


def test_sglang_dp_attention_replicates_the_embeddings():
    """SGLang builds VocabParallelEmbedding with TP off under --enable-dp-attention; vLLM always splits it."""
    plain, _ = replicated_params(MOE_CONFIG, "sglang")
    dp, what = replicated_params(MOE_CONFIG, "sglang", ["--enable-dp-attention"])
    assert dp - plain == 2 * 2 * 248320 * 3072 and "embeddings + lm_head" in what  # untied: two copies
    tied = {**MOE_CONFIG, "tie_word_embeddings": True}
    assert replicated_params(tied, "sglang", ["--enable-dp-attention"])[0] - plain == 2 * 248320 * 3072
    assert replicated_params(MOE_CONFIG, "vllm", ["--enable-dp-attention"])[0] == plain


def test_without_config_json_a_three_percent_allowance_is_stated():
    f = estimate_fit(100 * GIB, {"a": MEM, "b": MEM}, tp=2, pp=1, mem_fraction=0.8)
    assert f.weights_per_gpu == 50 * GIB + int(50 * GIB * 0.03)
    assert "3% allowance" in f.replicated_what and "replicated" in f.summary()
    one = estimate_fit(100 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.8)
    assert one.weights_per_gpu == 100 * GIB and one.replicated_bytes == 0  # one GPU: nothing is split


def test_each_engine_fraction_covers_what_its_help_says():
    """vLLM's budget holds activations too; SGLang's static pool holds weights + KV, activations outside."""
    v = estimate_fit(60 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.8, engine="vllm")
    s = estimate_fit(60 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.8, engine="sglang")
    assert v.headroom_bytes == 80 * GIB - 60 * GIB - RUNTIME_OVERHEAD
    assert s.headroom_bytes == 80 * GIB - 60 * GIB
    assert "weights, activations and KV cache" in v.summary() and "activations" in v.summary()
    assert "weights + KV cache, activations outside" in s.summary()
    assert s.to_json()["covers"] == s.covers and not s.warnings
    tight = estimate_fit(60 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.98, engine="sglang")
    assert any("outside --mem-fraction-static 0.98" in w for w in tight.warnings)
    assert not any(
        "outside" in w
        for w in estimate_fit(60 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.98, engine="vllm").warnings
    )


def test_defaults_are_nvidias_per_engine_unless_configured():
    from sparktui.core.plan.fit import default_fraction

    assert default_fraction("vllm") == 0.8 and default_fraction("sglang") == 0.75
    assert default_fraction("vllm", 0.7) == 0.7 and default_fraction("sglang", 0.9) == 0.9


def test_the_plan_counts_replicated_parameters_from_the_model_config():
    from sparktui.core.plan.plan import PlanOptions, make_plan

    from .test_plan import cluster

    config, facts, subnets = cluster(2)
    with_cfg = make_plan(config, facts, subnets, PlanOptions(engine="sglang", model_config=MOE_CONFIG)).fit
    without = make_plan(config, facts, subnets, PlanOptions(engine="sglang")).fit
    assert with_cfg.replicated_what == "norms + router" and "allowance" in without.replicated_what
    assert with_cfg.mem_fraction == 0.75 and with_cfg.engine == "sglang"
    assert 0 < with_cfg.replicated_bytes < without.replicated_bytes


def test_a_kv_cache_in_bytes_replaces_the_fraction_and_must_fit_whole():
    # vLLM's --kv-cache-memory-bytes: weights + activations + that cache, whatever the fraction
    kv = (100 * GIB - 80 * GIB - RUNTIME_OVERHEAD, "--kv-cache-memory-bytes")
    at = estimate_fit(80 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.5, engine="vllm", kv=kv)
    assert at.ok and at.headroom_bytes == kv[0] and at.budget_per_gpu == MEM
    assert "+ KV cache 17.0 GiB (--kv-cache-memory-bytes) = 100.0 GiB of 100.0 GiB" in at.summary()
    over = estimate_fit(80 * GIB, {"a": MEM}, tp=1, pp=1, mem_fraction=0.5, engine="vllm", kv=(kv[0] + 1, kv[1]))
    assert not over.ok and "smaller KV cache" in over.errors[0]
