"""Three Sparks in a ring: read from the addresses, planned with NVIDIA's ring settings over every HCA."""

from __future__ import annotations

from sparktui.core.network.fabric import topology
from sparktui.core.network.network import subnets
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.network.ring import describe_layout, layout, ring_of

from .ring_nodes import ring
from .test_plan import make_config, make_facts

ORDER = ["spark1", "spark2", "spark3"]


def _plan(facts):
    return make_plan(make_config(len(facts)), facts, subnets(list(facts.values())), PlanOptions())


def test_ring_is_read_from_point_to_point_subnets_each_shared_with_another_neighbour():
    facts = ring()
    r = ring_of(facts, ORDER)
    assert r is not None and r.order == ORDER and len(r.links) == 6  # three cables, two halves each
    assert [lk.subnet for lk in r.far("spark1")] == ["192.168.4.0/24", "192.168.5.0/24"]  # spark2 - spark3
    assert r.hcas("spark1") == ["rocep1s0f0", "roceP2p1s0f0", "rocep1s0f1", "roceP2p1s0f1"]
    assert topology(facts, ORDER) == "ring"
    assert describe_layout(layout(facts, ORDER, "ring")) == "ring, per-half subnets"
    assert describe_layout(layout(ring(per_half=False), ORDER, "ring")) == "ring, one subnet"


def test_nodes_that_all_share_a_fabric_subnet_are_no_ring_whatever_ports_are_up():
    facts = {f.name: f for f in (make_facts(i) for i in range(3))}  # 192.168.100.0/24 on all three
    assert ring_of(facts, ORDER) is None and topology(facts, ORDER) == "switch"
    # a line (spark1 - spark2 - spark3, the closing cable missing) is no ring either
    line = ring()
    for f in (line["spark1"], line["spark3"]):
        f.interfaces = [
            i for i in f.interfaces if not any(a.startswith("192.168.2.") or a.startswith("192.168.3.") for a in i.ipv4)
        ]
    assert ring_of(line, ORDER) is None


def test_a_ring_is_planned_over_the_management_rendezvous_with_every_hca_and_nvidias_ring_settings():
    plan = _plan(ring())
    assert not plan.errors, plan.errors
    assert plan.subnet == "10.0.0.0/24" and plan.head_ip == "10.0.0.11"
    assert any(
        "ring of 3 nodes" in w and "NCCL moves the data over every HCA" in w and "dgxspark-3node-ring" in w
        for w in plan.warnings
    )
    assert not any("NCCL would run over TCP" in w for w in plan.warnings)
    env = plan.nodes[1].env
    assert env["NCCL_SOCKET_IFNAME"] == "enP7s7"
    assert env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1,rocep1s0f0,roceP2p1s0f0"  # its link to spark1 first
    # NVIDIA's spark_cluster_setup.py run_nccl_test: subnet-aware routing, and on a ring no merged NICs, no plugin
    assert env["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1" and env["NCCL_NET_PLUGIN"] == "none"
    assert env["NCCL_IB_MERGE_NICS"] == "0"
    assert plan.fabric["topology"] == "ring" and plan.fabric["layout"]["topology"] == "ring"
    assert len(plan.fabric["ring"]["links"]) == 6
    assert plan.fabric["line_rate_mbps"] == 400000  # both ports, both halves each, on the slowest node


def test_the_mtu_is_checked_on_the_ring_links_not_on_the_management_rendezvous():
    facts = ring()
    next(i for i in facts["spark2"].interfaces if i.name == "enp1s0f0np0").mtu = 1500
    plan = _plan(facts)
    assert any("MTUs differ on 192.168.4.0/24" in e and "spark2 enp1s0f0np0 MTU 1500" in e for e in plan.errors)


def test_two_sparks_back_to_back_are_direct_and_get_no_ring_settings():
    facts = {f.name: f for f in (make_facts(i) for i in range(2))}
    plan = _plan(facts)
    assert plan.fabric["layout"] == {"topology": "direct", "subnets": "one subnet"}
    assert "NCCL_NET_PLUGIN" not in plan.nodes[0].env and "ring" not in plan.fabric


def test_the_inventory_says_the_layout_and_a_ring_draws_no_fabric_warnings():
    from sparktui.core.nodes.inventory import analyse

    inv = analyse(make_config(3), ring())
    assert inv.layout == {"topology": "ring", "subnets": "per-half"} and inv.to_json()["layout"] == inv.layout
    # each link reaching two nodes and the management subnet joining all three is the ring's design
    assert not any("reaches" in w or "management subnet" in w or "no RDMA" in w for w in inv.warnings), inv.warnings
    pair = analyse(make_config(2), {f.name: f for f in (make_facts(i) for i in range(2))})
    assert pair.layout == {"topology": "direct", "subnets": "one subnet"}


def test_check_prints_the_layout_it_sees(capsys):
    from sparktui.cli.check import print_inventory
    from sparktui.core.nodes.inventory import analyse

    config = make_config(3)
    print_inventory(config, analyse(config, ring()))
    assert "fabric layout: ring, per-half subnets" in capsys.readouterr().out
