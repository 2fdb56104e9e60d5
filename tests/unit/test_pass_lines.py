"""The preflight's bandwidth against NVIDIA's pass line for the fabric it found (direct, switch, ring)."""

from __future__ import annotations

from sparktui.core.network.network import subnets
from sparktui.core.plan.plan import PlanOptions, make_plan

from .ring_nodes import ring
from .test_fabric import _verdict, plan_of, spark_facts
from .test_plan import make_config


def test_a_direct_pair_is_held_to_21_875_and_a_ring_to_10_gb_s():
    both = plan_of([spark_facts(0), spark_facts(1)]).fabric
    v = _verdict(23.74, both)
    assert v.pass_line_gb_s == 21.875 and not v.below_pass_line
    assert "23.74 GB/s meets NVIDIA's all_gather_perf -b 16G pass line" in v.summary()
    assert "for a direct fabric (21.88 GB/s busbw)" in v.summary()
    # 90 % of the line rate and still under NVIDIA's line: the causes are named anyway
    low = _verdict(20.0, dict(both, line_rate_mbps=180000))
    assert low.below_pass_line and low.to_json()["below_pass_line"] is True and low.causes
    assert "20.00 GB/s below NVIDIA's" in low.summary()
    facts = ring()
    on_ring = make_plan(make_config(3), facts, subnets(list(facts.values())), PlanOptions()).fabric
    v = _verdict(12.0, on_ring)
    assert v.pass_line_gb_s == 10.0 and not v.below_pass_line and "for a ring fabric (10.00" in v.summary()
    assert _verdict(9.5, on_ring).below_pass_line


def test_no_pass_line_for_a_plain_tcp_stream_or_a_fabric_without_rdma():
    both = plan_of([spark_facts(0), spark_facts(1)]).fabric
    assert _verdict(0.5, both, transport="tcp").pass_line_gb_s is None
    v = _verdict(1.0, dict(both, rdma=False), transport="socket")
    assert v.pass_line_gb_s is None and "pass line" not in v.summary() and v.to_json()["below_pass_line"] is False
