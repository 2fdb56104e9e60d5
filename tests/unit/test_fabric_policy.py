"""The plan never leaves the fabric on its own: a fabric link down, without carrier or without an address
on a node is a plan error naming the node, the interface and its state, with the fix; any other network
is used only when chosen, with its cost said."""

from __future__ import annotations

from sparktui.core.nodes.inventory import analyse
from sparktui.core.network.network import TCP_VS_ROCE
from sparktui.core.plan.plan import PlanOptions, make_plan

from .test_plan import cluster


def _fabric(f):
    return next(i for i in f.interfaces if any(c.startswith("192.168.100.") for c in i.ipv4))


def plan_with(facts_change=None, last_subnet=None, **opts):
    config, facts, _ = cluster(2, **({"rdma": None} if opts.pop("no_rdma", False) else {}))
    if facts_change:
        facts_change(facts)
    inv = analyse(config, facts)
    return make_plan(config, facts, inv.subnets, PlanOptions(**opts), last_subnet=last_subnet)


def unplugged(facts):
    i = _fabric(facts["spark2"])
    i.up, i.state = False, "no carrier"


def test_a_fabric_link_without_carrier_is_an_error_naming_node_interface_and_state():
    ok = plan_with()
    assert ok.ok and ok.subnet == "192.168.100.0/24"
    plan = plan_with(unplugged)
    assert not plan.ok and plan.subnet is None and not plan.steps
    [err] = [e for e in plan.errors if "fabric" in e]
    iface = ok.nodes[1].iface
    assert f"spark2 {iface}: no carrier" in err and "cable" in err
    assert "--iface 10.0.0.0/24" in err and TCP_VS_ROCE in err  # the other way, on purpose, with its cost


def test_an_interface_set_down_or_without_address_is_named_too():
    def set_down(facts):
        i = _fabric(facts["spark2"])
        i.up, i.state = False, "link down"

    def no_address(facts):
        _fabric(facts["spark2"]).ipv4 = []

    down = plan_with(set_down)
    assert any("link down" in e and "ip link set" in e for e in down.errors), down.errors
    bare = plan_with(no_address)
    assert any("spark2" in e and "no address" in e for e in bare.errors), bare.errors


def test_the_management_network_only_when_chosen_and_with_its_cost():
    plan = plan_with(unplugged, rendezvous="10.0.0.0/24")
    assert plan.ok and plan.subnet == "10.0.0.0/24"
    assert any("management subnet" in w and TCP_VS_ROCE in w for w in plan.warnings)


def test_the_last_launchs_subnet_is_the_fabric_even_without_rdma():
    ok = plan_with(no_rdma=True, last_subnet="192.168.100.0/24")
    assert ok.ok and ok.subnet == "192.168.100.0/24"
    plan = plan_with(unplugged, no_rdma=True, last_subnet="192.168.100.0/24")
    assert any("last launch" in e and "no carrier" in e for e in plan.errors), plan.errors
