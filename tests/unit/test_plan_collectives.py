"""A plan that turns on the b12x image's RoCE all-reduce says so, and the fabric's judgement stops blaming NCCL's
bandwidth for decode speed there."""

from __future__ import annotations

from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.preflight import rate

from .test_fabric import plan_of, spark_facts
from .test_plan import cluster

ROCE = {"VLLM_ENABLE_ROCE_ALLREDUCE": "1", "VLLM_ROCE_ALLREDUCE_MAX_SIZE": "2MB"}
B12X = "eugr/spark-vllm-b12x:nightly-20260923"


def _plan(n: int, image: str, env: dict):
    config, facts, subnets = cluster(n)
    return make_plan(config, facts, subnets, PlanOptions(engine="vllm", mode="native", image=image, env=dict(env)))


def test_the_roce_all_reduce_is_shown_in_the_plan_and_its_json():
    plan = _plan(2, B12X, ROCE)
    assert plan.collectives_line == (
        "TP all-reduce: b12x one-shot RoCE collectives (RoCEnante) up to 2MB, NCCL above (VLLM_ENABLE_ROCE_ALLREDUCE=1)"
    )
    j = plan.to_json()["collectives"]
    assert j["tp_all_reduce"]["active"] is True and j["tp_all_reduce"]["max_size"] == "2MB"
    assert j["image"]["repo"] == "eugr/spark-vllm-b12x" and j["image"]["built"] == "2026-09-23"
    assert plan.nodes[1].env["VLLM_ENABLE_ROCE_ALLREDUCE"] == "1"  # every rank votes, so every rank has it
    assert "decode" in plan.fabric["nccl_scope"] and "2MB" in plan.fabric["nccl_scope"]


def test_nccl_alone_is_the_plain_case():
    plan = _plan(2, "eugr/spark-vllm:nightly-20260909", {})
    assert plan.collectives_line is None and "nccl_scope" not in plan.fabric
    assert plan.to_json()["collectives"]["tp_all_reduce"] == {"by": "NCCL"}
    plan = _plan(2, "vllm/vllm-openai:v0.33.0", {})
    assert plan.to_json()["collectives"] is None


def test_the_switch_on_an_image_that_ignores_it_is_a_warning_and_nccl_keeps_the_blame():
    plan = _plan(2, "eugr/spark-vllm:latest", ROCE)
    assert any(
        w.startswith("VLLM_ENABLE_ROCE_ALLREDUCE=1: eugr/spark-vllm:latest does not read it")
        and "eugr/spark-vllm-b12x" in w
        for w in plan.warnings
    )
    assert plan.to_json()["collectives"]["tp_all_reduce"]["active"] is False
    assert "nccl_scope" not in plan.fabric


def test_one_node_leaves_it_off():
    plan = _plan(1, B12X, ROCE)
    assert plan.to_json()["collectives"]["tp_all_reduce"]["active"] is False
    assert any("one node" in n for n in plan.notes)


def test_an_idle_half_is_not_blamed_for_decode_where_the_roce_all_reduce_runs():
    facts = [spark_facts(0, twin_down=True), spark_facts(1, twin_down=True)]
    plain = next(w for w in plan_of(facts, engine="vllm", mode="native", image=B12X).warnings if "idle" in w)
    roce = next(
        w for w in plan_of(facts, engine="vllm", mode="native", image=B12X, env=dict(ROCE)).warnings if "idle" in w
    )
    assert "decode" not in plain
    assert roce.startswith(plain) and "NCCL's bandwidth does not bound decode speed" in roce


def test_the_preflight_says_what_a_short_nccl_bandwidth_costs_there():
    fabric = {"rdma": True, "line_rate_mbps": 200000, "halves_in_use": {"a": 2}, "port_halves": {"a": 2}}
    assert not any("decode" in c for c in rate.causes("ib", fabric, "2.28.9"))
    scoped = dict(fabric, nccl_scope=_plan(2, B12X, ROCE).fabric["nccl_scope"])
    assert rate.causes("ib", scoped, "2.28.9")[-1].startswith("what this costs: NCCL carries only the all-reduces")
    assert rate.scope(scoped) and rate.scope(fabric) is None


def test_a_passing_preflight_says_what_its_bandwidth_bounds_there():
    from sparktui.core.preflight import NodeResult, Setting, Verdict

    nodes = {
        n: NodeResult(
            node=n, rank=i, ok=True, transport="rdma", bandwidth_gb_s=22.0, bandwidth_what="all-reduce bus bandwidth"
        )
        for i, n in enumerate(("spark1", "spark2"))
    }
    fabric = {"rdma": True, "line_rate_mbps": 200000, "halves_in_use": {"spark1": 2, "spark2": 2}}
    plain = Verdict(setting=Setting("10.0.0.1", 29501, "10.0.0.0/24", B12X, 30, fabric=fabric), nodes=nodes)
    scope = _plan(2, B12X, ROCE).fabric["nccl_scope"]
    roce = Verdict(
        setting=Setting("10.0.0.1", 29501, "10.0.0.0/24", B12X, 30, fabric=dict(fabric, nccl_scope=scope)), nodes=nodes
    )
    assert "decode" not in plain.summary()
    assert f"  {scope}" in roce.summary().splitlines()
