"""Each fabric half's subnet proven by the preflight: a half that carries no traffic is named, with the fix."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from sparktui.core.preflight import NodeResult, Setting, Verdict
from sparktui.core.preflight.halves import probe, probe_command

from ..fakes import FakeCluster, FakeNode
from .test_fabric import plan_of, spark_facts

OK = "3 packets transmitted, 3 received, 0% packet loss, time 402ms"
LOST = "3 packets transmitted, 0 received, 100% packet loss, time 2043ms"


def _ran(answers: dict[str, str], seen: list[str] | None = None):
    def answer(node: str, command: str):
        if seen is not None:
            seen.append(f"{node}: {command}")
        text = next((t for iface, t in answers.items() if f" -I {iface} " in command), "")
        return SimpleNamespace(stdout=text, stderr="", exit_status=0 if text == OK else 1)

    return FakeCluster([FakeNode(n, answer) for n in ("spark1", "spark2")])


def _verdict(fabric: dict, halves) -> Verdict:
    s = Setting(addr="192.168.100.10", port=29500, subnet="192.168.100.0/24", image="img", timeout=30, fabric=fabric)
    nodes = {
        name: NodeResult.from_check(
            name, rank, "enp1s0f1np1", f"192.168.100.{10 + rank}", {"ok": True, "path": "tcp", "transport": "tcp"}
        )
        for rank, name in enumerate(("spark1", "spark2"))
    }
    return Verdict(setting=s, nodes=nodes, seconds=5.0, halves=halves)


def test_each_half_of_a_sync_layout_is_pinged_out_of_its_own_interface():
    fabric = plan_of([spark_facts(0), spark_facts(1)]).fabric
    assert [r["subnet"] for r in fabric["rails"]] == ["192.168.100.0/24", "192.168.101.0/24"]
    seen: list[str] = []
    got = asyncio.run(probe(_ran({"enp1s0f1np1": OK, "enP2p1s0f1np1": OK}, seen), fabric["rails"]))
    assert [h.ok for h in got] == [True, True]
    assert any(c.startswith("spark2: ") and "-I enP2p1s0f1np1 192.168.101.10" in c for c in seen), seen
    assert probe_command("enp1s0f1np1", "192.168.100.10").count("-w 3") == 1  # bounded
    v = _verdict(fabric, got)
    assert v.ok and "halves: 2 fabric subnet(s) carried traffic (192.168.100.0/24, 192.168.101.0/24)" in v.summary()


def test_a_half_that_carries_no_traffic_fails_the_check_and_is_named_with_the_fix():
    fabric = plan_of([spark_facts(0), spark_facts(1)]).fabric
    got = asyncio.run(probe(_ran({"enp1s0f1np1": OK, "enP2p1s0f1np1": LOST}), fabric["rails"]))
    v = _verdict(fabric, got)
    assert not v.ok  # the rendezvous met: the dead half alone fails the check
    assert "the fabric half spark2 enP2p1s0f1np1 (roceP2p1s0f1) on 192.168.101.0/24 carries no traffic" in v.reason
    assert "`ip link show enP2p1s0f1np1` on spark2" in v.fix and "iptables" in v.fix
    j = v.to_json()
    assert j["ok"] is False and [h["ok"] for h in j["halves"]] == [True, False]


def test_a_node_without_ping_leaves_the_half_unproven_not_failed():
    fabric = plan_of([spark_facts(0), spark_facts(1)]).fabric

    def answer(node, command):
        return SimpleNamespace(stdout="ping: command not found", stderr="", exit_status=127)

    got = asyncio.run(probe(FakeCluster([FakeNode(n, answer) for n in ("spark1", "spark2")]), fabric["rails"]))
    v = _verdict(fabric, got)
    assert v.ok and all(h.ok is None for h in got)
    assert "half not proven: " in v.summary() and "ping is not on spark2" in v.summary()


def test_a_half_without_an_address_to_send_from_is_dead_not_unknown():
    fabric = plan_of([spark_facts(0), spark_facts(1)]).fabric
    bind = "ping: bind: Cannot assign requested address"
    got = asyncio.run(probe(_ran({"enp1s0f1np1": OK, "enP2p1s0f1np1": bind}), fabric["rails"]))
    assert [h.ok for h in got] == [True, False]
