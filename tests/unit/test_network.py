"""Subnet analysis: which subnet joins all nodes, per-node interface, ranking, overrides, resolve."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparktui.core.nodes.facts import Interface, NodeFacts
from sparktui.core.network.network import best_subnet, resolve, subnets, warnings
from sparktui.core.nodes.probes import parse_ibdev2netdev, parse_ip_addr, parse_speeds

SAMPLES = Path(__file__).parent / "samples" / "probes"


def spark(name: str, host: str, ip_sample: str) -> NodeFacts:
    """A Spark's facts from its real ip / ibdev2netdev / sysfs speed output."""
    ifs = parse_ip_addr((SAMPLES / ip_sample).read_text())
    rdma = parse_ibdev2netdev((SAMPLES / "ibdev2netdev-spark.txt").read_text())
    speed = parse_speeds((SAMPLES / "speed-spark.txt").read_text())
    for i in ifs:
        i.rdma, i.speed_mbps = rdma.get(i.name), speed.get(i.name)
    return NodeFacts(name=name, host=host, reachable=True, interfaces=ifs, infiniband=True)


def node(name: str, host: str, *ifaces: Interface, reachable: bool = True) -> NodeFacts:
    return NodeFacts(name=name, host=host, reachable=reachable, interfaces=list(ifaces))


def nic(name: str, *cidrs: str, up: bool = True, rdma: str | None = None, speed: int | None = None) -> Interface:
    return Interface(name=name, ipv4=list(cidrs), up=up, rdma=rdma, speed_mbps=speed)


@pytest.fixture
def two_sparks() -> list[NodeFacts]:
    return [
        spark("spark1", "192.168.1.101", "ip-addr-spark1.json"),
        spark("spark2", "192.168.1.102", "ip-addr-spark2.json"),
    ]


# --- two Sparks from real samples -------------------------------------------------------------


def test_two_sparks_pick_the_cx7_link(two_sparks):
    found = subnets(two_sparks)
    best = found[0]
    assert best.subnet == "192.168.100.0/24"
    assert best.rdma and best.up and best.speed_mbps == 200000 and not best.management
    assert best.nodes["spark1"].iface == "enp1s0f1np1" and best.nodes["spark1"].ip == "192.168.100.10"
    assert best.nodes["spark2"].ip == "192.168.100.11"
    assert best.nodes["spark2"].rdma == "rocep1s0f1"
    assert best_subnet(two_sparks) == best


def test_two_sparks_management_last_and_docker0_ignored(two_sparks):
    found = {s.subnet: s for s in subnets(two_sparks)}
    assert set(found) == {"192.168.100.0/24", "192.168.101.0/24", "192.168.1.0/24"}
    mgmt = found["192.168.1.0/24"]
    assert mgmt.management and not mgmt.rdma
    assert subnets(two_sparks)[-1] is not None and subnets(two_sparks)[-1].subnet == mgmt.subnet
    # spark2 has Wi-Fi on the same LAN: the first interface listed wins, and it is said.
    assert mgmt.nodes["spark2"].iface == "enP7s7"
    assert any("wlP9s9" in n for n in mgmt.notes)


def test_twins_on_one_subnet_warn():
    facts = [
        spark("spark1", "192.168.1.101", "ip-addr-spark1-twins.json"),
        spark("spark2", "192.168.1.102", "ip-addr-spark2.json"),
    ]
    best = best_subnet(facts)
    assert best.subnet == "192.168.100.0/24"
    assert best.nodes["spark1"].iface == "enp1s0f1np1"  # listed first
    w = warnings(subnets(facts), facts)
    twin = [x for x in w if "twins" in x]
    assert len(twin) == 1 and "enP2p1s0f1np1" in twin[0] and "spark1" in twin[0]
    assert "192.168.101.0/24" not in {s.subnet for s in subnets(facts)}


def test_hostname_dial_hosts_leave_management_unknown(two_sparks):
    found = subnets(two_sparks, dial_hosts={"spark1": "spark1.lan", "spark2": "spark2"})
    assert not any(s.management for s in found)
    assert {s.subnet for s in found} == {s.subnet for s in subnets(two_sparks)}


# --- more nodes, built by hand ----------------------------------------------------------------


def test_three_nodes_interface_names_differ():
    facts = [
        node("a", "10.0.0.1", nic("eno1", "10.0.0.1/24"), nic("enp1s0f1np1", "192.168.100.1/24", rdma="rocep1s0f1")),
        node("b", "10.0.0.2", nic("eno1", "10.0.0.2/24"), nic("ens3f0np0", "192.168.100.2/24", rdma="mlx5_0")),
        node("c", "10.0.0.3", nic("eth0", "10.0.0.3/24"), nic("enp2s0np0", "192.168.100.3/24", rdma="mlx5_1")),
    ]
    best = best_subnet(facts)
    assert best.subnet == "192.168.100.0/24" and best.rdma
    assert {n: a.iface for n, a in best.nodes.items()} == {"a": "enp1s0f1np1", "b": "ens3f0np0", "c": "enp2s0np0"}
    assert {n: a.rdma for n, a in best.nodes.items()} == {"a": "rocep1s0f1", "b": "mlx5_0", "c": "mlx5_1"}
    mgmt = [s for s in subnets(facts) if s.management]
    assert [s.subnet for s in mgmt] == ["10.0.0.0/24"]
    assert warnings(subnets(facts), facts) == []


def test_node_missing_the_fabric():
    facts = [
        node("a", "10.0.0.1", nic("eno1", "10.0.0.1/24"), nic("fab0", "192.168.100.1/24", rdma="r0")),
        node("b", "10.0.0.2", nic("eno1", "10.0.0.2/24"), nic("fab0", "192.168.100.2/24", rdma="r0")),
        node("c", "10.0.0.3", nic("eno1", "10.0.0.3/24"), nic("fab0", up=False)),
    ]
    found = subnets(facts)
    assert [s.subnet for s in found] == ["10.0.0.0/24"]
    w = warnings(found, facts)
    assert any(x.startswith("192.168.100.0/24 reaches a, b but not c") for x in w)
    only = [x for x in w if "only the management subnet" in x]
    assert len(only) == 1 and "12.7" in only[0]


def test_no_subnet_joins_all():
    facts = [node("a", "a", nic("e", "10.1.0.1/24")), node("b", "b", nic("e", "10.2.0.1/24"))]
    assert subnets(facts) == [] and best_subnet(facts) is None
    assert any("no subnet joins all nodes" in x for x in warnings([], facts))
    with pytest.raises(ValueError, match="no subnet joins all nodes"):
        resolve([], "10.1.0.0/24", ["a", "b"])


def test_four_nodes_rdma_beats_faster_tcp_and_speed_orders_the_rest():
    def four(i: int) -> NodeFacts:
        return node(
            f"n{i}",
            f"10.0.0.{i}",
            nic("mgmt", f"10.0.0.{i}/24", speed=10000),
            nic("tcp400", f"172.16.4.{i}/24", speed=400000),
            nic("roce", f"172.16.2.{i}/24", rdma=f"mlx5_{i}", speed=200000),
            nic("tcp25", f"172.16.25.{i}/24", speed=25000),
            nic("unknown", f"172.16.9.{i}/24"),
        )

    facts = [four(i) for i in range(1, 5)]
    order = [s.subnet for s in subnets(facts)]
    assert order == ["172.16.2.0/24", "172.16.4.0/24", "172.16.25.0/24", "10.0.0.0/24", "172.16.9.0/24"]
    # One node without RDMA on it drops that subnet to plain TCP ranking.
    facts[2].interfaces[2].rdma = None
    found = subnets(facts)
    assert not next(s for s in found if s.subnet == "172.16.2.0/24").rdma
    assert found[0].subnet == "172.16.4.0/24"
    assert any(x.startswith("172.16.4.0/24 has no RDMA device on n1, n2, n3, n4") for x in warnings(found, facts))
    rdma_gone = next(s for s in found if s.subnet == "172.16.2.0/24")
    assert rdma_gone.nodes["n3"].rdma is None and rdma_gone.nodes["n1"].rdma == "mlx5_1"


def test_slowest_speed_counts():
    facts = [
        node("a", "a", nic("f", "10.9.0.1/24", speed=200000)),
        node("b", "b", nic("f", "10.9.0.2/24", speed=100000)),
    ]
    assert best_subnet(facts).speed_mbps == 100000


def test_management_loses_ties():
    facts = [node(f"n{i}", f"10.0.0.{i}", nic("a", f"10.0.0.{i}/24"), nic("b", f"10.200.0.{i}/24")) for i in (1, 2)]
    found = subnets(facts)
    assert [s.subnet for s in found] == ["10.200.0.0/24", "10.0.0.0/24"]
    assert [s.management for s in found] == [False, True]


def test_eight_nodes_down_link_ranks_below():
    facts = [
        node(
            f"gpu{i}",
            f"10.0.0.{i}",
            nic("eth0", f"10.0.0.{i}/24", speed=10000),
            nic("ib0", f"10.10.0.{i}/24", rdma=f"mlx5_{i}", speed=400000, up=i != 5),
            nic("ib1", f"10.11.0.{i}/24", rdma=f"mlx5_{i + 8}", speed=200000),
        )
        for i in range(1, 9)
    ]
    found = subnets(facts)
    assert len(found) == 3
    assert found[0].subnet == "10.11.0.0/24" and len(found[0].nodes) == 8
    down = next(s for s in found if s.subnet == "10.10.0.0/24")
    assert not down.up and any(n == "gpu5: ib0 on 10.10.0.0/24 is down" for n in down.notes)


def test_unreachable_node_is_left_out():
    facts = [
        node("a", "10.0.0.1", nic("f", "10.9.0.1/24")),
        node("b", "10.0.0.2", nic("f", "10.9.0.2/24")),
        NodeFacts(name="c", host="10.0.0.3", reachable=False, error="connection refused"),
    ]
    found = subnets(facts)
    assert [s.subnet for s in found] == ["10.9.0.0/24"] and set(found[0].nodes) == {"a", "b"}
    assert any("c is unreachable" in x and "connection refused" in x for x in warnings(found, facts))


def test_same_address_everywhere_is_not_shared():
    facts = [
        node(f"n{i}", f"10.0.0.{i}", nic("eth0", f"10.0.0.{i}/24"), nic("br0", "192.168.122.1/24")) for i in (1, 2, 3)
    ]
    assert [s.subnet for s in subnets(facts)] == ["10.0.0.0/24"]


def test_first_address_on_a_subnet_is_deterministic():
    a = node("a", "a", nic("x1", "10.5.0.1/24", "10.5.0.9/24"), nic("x2", "10.5.0.7/24"))
    b = node("b", "b", nic("y", "10.5.0.2/24"))
    best = best_subnet([a, b])
    assert (best.nodes["a"].iface, best.nodes["a"].ip) == ("x1", "10.5.0.1")
    assert best_subnet([b, a]).nodes == best.nodes


def test_order_of_input_does_not_change_ranking():
    facts = [
        node(
            f"n{i}",
            f"10.0.0.{i}",
            nic("m", f"10.0.0.{i}/24"),
            nic("a", f"10.1.0.{i}/24"),
            nic("b", f"10.2.0.{i}/24"),
            nic("c", f"10.3.0.{i}/24"),
        )
        for i in (1, 2, 3)
    ]
    want = [s.subnet for s in subnets(facts)]
    rng = random.Random(7)
    for _ in range(5):
        for f in facts:
            rng.shuffle(f.interfaces)
        assert [s.subnet for s in subnets(facts)] == want


# --- overrides --------------------------------------------------------------------------------


def _two_on_fabric() -> list[NodeFacts]:
    return [
        node("a", "10.0.0.1", nic("p0", "192.168.100.1/24", rdma="r0"), nic("p1", "192.168.100.5/24", rdma="r1")),
        node("b", "10.0.0.2", nic("q0", "192.168.100.2/24", rdma="s0")),
    ]


def test_override_forces_the_interface():
    best = best_subnet(_two_on_fabric(), overrides={"a": {"192.168.100.0/24": "p1"}})
    assert (best.nodes["a"].iface, best.nodes["a"].ip, best.nodes["a"].rdma) == ("p1", "192.168.100.5", "r1")
    assert best_subnet(_two_on_fabric()).nodes["a"].iface == "p0"


def test_override_key_need_not_be_the_network_address():
    best = best_subnet(_two_on_fabric(), overrides={"a": {"192.168.100.77/24": "p1"}})
    assert best.nodes["a"].iface == "p1"


def test_override_naming_a_missing_interface_is_noted():
    best = best_subnet(_two_on_fabric(), overrides={"b": {"192.168.100.0/24": "nope"}})
    assert best.nodes["b"].iface == "q0"
    assert any("nope" in n and n.startswith("b:") for n in best.notes)


# --- resolve ----------------------------------------------------------------------------------


def test_resolve_by_cidr_ifname_and_ip(two_sparks):
    found = subnets(two_sparks)
    names = ["spark1", "spark2"]
    assert resolve(found, "192.168.101.0/24", names).subnet == "192.168.101.0/24"
    assert resolve(found, "192.168.101.10/24", names).subnet == "192.168.101.0/24"
    assert resolve(found, "enP2p1s0f1np1", names).subnet == "192.168.101.0/24"
    assert resolve(found, "enP7s7", names).subnet == "192.168.1.0/24"
    assert resolve(found, "192.168.100.11", names).subnet == "192.168.100.0/24"
    assert resolve(found, " 192.168.100.0/24 ", names).subnet == "192.168.100.0/24"


def test_resolve_ifname_on_head_then_unique_elsewhere():
    facts = [
        node("h", "10.0.0.1", nic("fabA", "10.9.0.1/24"), nic("x", "10.8.0.1/24")),
        node("w", "10.0.0.2", nic("fabB", "10.9.0.2/24"), nic("fabA", "10.8.0.2/24")),
    ]
    found = subnets(facts)
    assert resolve(found, "fabA", ["h", "w"]).subnet == "10.9.0.0/24"  # the head's fabA
    assert resolve(found, "fabA", ["w", "h"]).subnet == "10.8.0.0/24"  # w as head
    assert resolve(found, "fabB", ["h", "w"]).subnet == "10.9.0.0/24"  # only w has it: unambiguous


@pytest.mark.parametrize("spec", ["10.77.0.0/16", "wlan9", "172.17.0.1", "300.1.2.3/24", ""])
def test_resolve_lists_choices_when_nothing_matches(two_sparks, spec):
    found = subnets(two_sparks)
    with pytest.raises(ValueError) as err:
        resolve(found, spec, ["spark1", "spark2"])
    msg = str(err.value)
    assert all(s.subnet in msg for s in found)
    assert "enp1s0f1np1" in msg


def test_resolve_refuses_a_subnet_missing_a_node():
    facts = [node("a", "a", nic("f", "10.9.0.1/24")), node("b", "b", nic("f", "10.9.0.2/24"))]
    with pytest.raises(ValueError, match="10.9.0.0/24 joins a, b, c"):
        resolve(subnets(facts), "10.9.0.0/24", ["a", "b", "c"])
