"""The fabric at its rate on real nodes: the idle twin half and the MTU, as `sparktui plan` sees them
through OpenSSH, `ip -j addr` and ibdev2netdev, before and after the fixes it prints."""

from __future__ import annotations

import json

import pytest

from .labtools import cli

pytestmark = pytest.mark.lab


def plan(lab) -> dict:
    r = cli(lab.config_path, "plan", "--engine", "vllm", "--json")
    try:
        return json.loads(r.stdout)
    except ValueError:
        pytest.fail(f"plan --json printed no JSON (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")


def _has(msgs: list[str], *words: str) -> bool:
    return any(all(w in m for w in words) for m in msgs)


def test_plan_warns_about_the_idle_twin_and_the_mtu_then_follows_each_fix(make_lab):
    lab = make_lab(nodes=2, docker=False)
    n1, n2 = lab.nodes
    out = plan(lab)
    warns = out["warnings"]
    # a fresh Spark: one half addressed at MTU 1500, its twin down and unaddressed
    assert _has(
        warns,
        "idle",
        n1.twin_iface,
        n1.twin_rdma,
        "about half the link",
        f"sudo ip addr add {n1.twin_ip}/24 dev {n1.twin_iface} && sudo ip link set {n1.twin_iface} up",
    ), warns
    assert _has(warns, f"sudo ip addr add {n2.twin_ip}/24 dev {n2.twin_iface}"), warns
    assert _has(
        warns,
        "MTU below 9000",
        f"{n1.name} {n1.fabric_iface} 1500",
        f"{n2.name} {n2.fabric_iface} 1500",
        f"`sudo ip link set {n1.fabric_iface} mtu 9000` on {n1.name}",
    ), warns
    assert out["nodes"][0]["rdma"] == n1.rdma  # NCCL_IB_HCA where /dev/infiniband is (not in the lab)

    lab.set_mtu(n1, 9000)  # one node fixed, the other not yet: large frames would be dropped
    out = plan(lab)
    assert _has(
        out["errors"], "MTUs differ", f"{n1.name} {n1.fabric_iface} MTU 9000", f"{n2.name} {n2.fabric_iface} MTU 1500"
    ), out["errors"]

    lab.set_mtu(n2, 9000)
    out = plan(lab)
    assert not _has(out["errors"], "MTUs differ") and not _has(out["warnings"], "MTU below"), out

    for n in lab.nodes:  # the playbook's commands for the twin, with jumbo frames on it too
        lab.set_mtu(n, 9000, n.twin_iface)
        lab.twin_up(n)
    out = plan(lab)
    assert not _has(out["warnings"], "idle"), out["warnings"]
    assert out["nodes"][0]["rdma"] == f"{n1.rdma},{n1.twin_rdma}"
    assert out["nodes"][1]["rdma"] == f"{n2.rdma},{n2.twin_rdma}"
