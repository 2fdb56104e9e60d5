"""A ring's transit on each node, from the look's recorded output: forwarding, routes, iptables' FORWARD."""

from __future__ import annotations

import json

from sparktui.core.network.network import subnets
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.preflight.remote import look_command, parse_look
from sparktui.core.preflight.transit import judge
from sparktui.core.preflight.verdict import Setting, Verdict

from .ring_nodes import ring
from .test_plan import make_config

# spark1's `ip -4 route show` on NVIDIA's ring3 addressing: only its own links, nothing to spark2 - spark3.
ROUTES = """default via 10.0.0.1 dev enP7s7 proto static
10.0.0.0/24 dev enP7s7 proto kernel scope link src 10.0.0.11
192.168.0.0/24 dev enp1s0f0np0 proto kernel scope link src 192.168.0.1
192.168.1.0/24 dev enP2p1s0f0np0 proto kernel scope link src 192.168.1.1
192.168.2.0/24 dev enp1s0f1np1 proto kernel scope link src 192.168.2.1
192.168.3.0/24 dev enP2p1s0f1np1 proto kernel scope link src 192.168.3.1"""
ROUTED = (
    ROUTES
    + """
192.168.4.0/23 via 192.168.0.2 dev enp1s0f0np0"""
)
# `iptables -S FORWARD` then `-S DOCKER-USER` after Docker 28 installed itself
DOCKER_FORWARD = """-P FORWARD DROP
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-FORWARD
-A FORWARD -i docker0 ! -o docker0 -j ACCEPT
-N DOCKER-USER
-A DOCKER-USER -j RETURN"""
RELAYED = (
    DOCKER_FORWARD
    + """
-A DOCKER-USER -i enp1s0f0np0 -o enp1s0f1np1 -j ACCEPT
-A DOCKER-USER -i enp1s0f1np1 -o enp1s0f0np0 -j ACCEPT
-A DOCKER-USER -i enP2p1s0f0np0 -j ACCEPT
-A DOCKER-USER -i enP2p1s0f1np1 -o enP2p1s0f0np0 -j ACCEPT
-A DOCKER-USER -i enp1s0f1np1 -o enP2p1s0f0np0 -j ACCEPT
-A DOCKER-USER -i enP2p1s0f1np1 -o enp1s0f0np0 -j ACCEPT"""
)
IP_JSON = [
    {
        "ifname": "enP7s7",
        "flags": ["UP"],
        "operstate": "UP",
        "addr_info": [{"family": "inet", "local": "10.0.0.11", "prefixlen": 24}],
    }
]


def _look(fwd: str = "1", routes: str = ROUTES, iptables: str = DOCKER_FORWARD):
    return parse_look(
        f"@@ip\n{json.dumps(IP_JSON)}\n@@image\nsha256:{'ab' * 32}\n@@rc 0\n@@ib\nyes\n"
        f"@@fwd\n{fwd}\n@@routes\n{routes}\n@@iptables\n{iptables}\n"
    )


def _ring() -> dict:
    facts = ring()
    return make_plan(make_config(3), facts, subnets(list(facts.values())), PlanOptions()).fabric["ring"]


def test_the_look_asks_for_forwarding_routes_and_the_forward_chain_without_a_prompt():
    cmd = look_command("img:1")
    assert "/proc/sys/net/ipv4/ip_forward" in cmd and "ip -4 route show" in cmd
    assert "sudo -n iptables -S FORWARD" in cmd and "iptables -S DOCKER-USER" in cmd


def test_a_node_docker_left_dropping_transit_gets_each_fix_named():
    problems, notes = judge("spark1", _look(fwd="0").transit, _ring())
    assert notes == []
    by = {p.what.split(" ")[0]: p for p in problems}
    assert by["net.ipv4.ip_forward"].fix[0] == "sudo sysctl -w net.ipv4.ip_forward=1"
    routes = [p for p in problems if p.what.startswith("no route")]
    assert [p.fix for p in routes] == [
        ["sudo ip route replace 192.168.4.0/24 via 192.168.0.2 dev enp1s0f0np0"],
        ["sudo ip route replace 192.168.5.0/24 via 192.168.0.2 dev enp1s0f0np0"],
    ]
    assert "spark2 - spark3" in routes[0].what
    drop = by["iptables'"]
    assert "policy is DROP" in drop.what and "like a dead cable" in drop.what
    # relays only between interfaces facing different neighbours: port 0 (spark2) <-> port 1 (spark3)
    assert "sudo iptables -I DOCKER-USER 1 -i enp1s0f0np0 -o enp1s0f1np1 -j ACCEPT" in drop.fix
    assert not any("-i enp1s0f0np0 -o enP2p1s0f0np0" in f for f in drop.fix)  # both face spark2
    assert len(drop.fix) == 8


def test_a_node_that_forwards_routes_and_accepts_its_relays_passes():
    problems, _ = judge("spark1", _look(routes=ROUTED, iptables=RELAYED).transit, _ring())
    assert [p.fix for p in problems] == [["sudo iptables -I DOCKER-USER 1 -i enp1s0f0np0 -o enP2p1s0f1np1 -j ACCEPT"]]
    relayed = RELAYED + "\n-A DOCKER-USER -i enp1s0f0np0 -o enP2p1s0f1np1 -j ACCEPT"
    assert judge("spark1", _look(routes=ROUTED, iptables=relayed).transit, _ring()) == ([], [])
    # a route that leaves by the management NIC is not one to the ring
    wrong = ROUTES + "\n192.168.4.0/22 via 10.0.0.1 dev enP7s7"
    problems, _ = judge("spark1", _look(routes=wrong, iptables="-P FORWARD ACCEPT").transit, _ring())
    assert [p.what.startswith("no route") for p in problems] == [True, True]


def test_unreadable_iptables_is_said_with_the_command_to_look_and_no_guess():
    problems, notes = judge("spark1", _look(routes=ROUTED, iptables="").transit, _ring())
    assert problems == [] and len(notes) == 1 and "sudo iptables -S FORWARD" in notes[0]
    # an older look without the sections judges nothing
    assert judge("spark1", parse_look(f"@@ip\n{json.dumps(IP_JSON)}\n").transit, _ring()) == ([], [])


def test_the_verdict_lists_each_node_s_transit_problem_with_its_fix():
    problems, _ = judge("spark3", _look(fwd="0", routes="", iptables="-P FORWARD ACCEPT").transit, _ring())
    v = Verdict(
        setting=Setting(addr="10.0.0.11", port=29501, subnet="10.0.0.0/24", image="img", timeout=30), transit=problems
    )
    assert "ring transit: spark3: net.ipv4.ip_forward is 0" in v.summary()
    assert "`sudo ip route replace 192.168.0.0/24 via 192.168.2.1 dev enp1s0f0np0`" in v.summary()
    j = v.to_json()["ring_transit"]
    assert j[0]["node"] == "spark3" and j[0]["fix"][0] == "sudo sysctl -w net.ipv4.ip_forward=1"
