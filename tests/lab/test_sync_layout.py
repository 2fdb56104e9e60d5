"""Two lab nodes cabled as NVIDIA Sync writes a fabric: both halves of each port up, each half on a subnet of
its own, one interface per node on each. Plan, check and the preflight read that layout; a half that stops
carrying traffic after the plan is named by the preflight."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from .labtools import REPO
from .netlab import Lab
from .test_preflight import check, leftover_containers
from .test_check import check as check_cli

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def sync(make_lab_module, tmp_path_factory) -> Lab:
    if shutil.which("ping") is None:
        pytest.skip("needs ping (iputils-ping): the preflight pings each half's subnet")
    lab = make_lab_module(nodes=2, layout="sync")
    tar = tmp_path_factory.mktemp("sim") / "sim.tar"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_sim_image.py"), "-o", str(tar)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    lab.load_image(tar)
    return lab


@pytest.fixture(scope="module")
def make_lab_module():
    from .conftest import _build

    made: list[Lab] = []

    def make(**kw) -> Lab:
        made.append(_build(**kw))
        return made[-1]

    yield make
    for lab in made:
        lab.destroy()


def test_check_says_the_layout_it_sees(sync):
    rc, out, _, err = check_cli(sync.config_path)
    assert rc == 0, err
    assert out["layout"] == {"topology": "direct", "subnets": "per-half"}
    assert {sync.fabric_subnet, sync.twin_subnet} <= {s["subnet"] for s in out["fabric"]}


async def test_plan_uses_both_halves_and_the_preflight_proves_each_halfs_subnet(sync):
    v, plan, _ = await check(sync)
    assert plan.subnet == sync.fabric_subnet and plan.head_ip == sync.head.fabric_ip  # on the fabric
    assert plan.fabric["halves_in_use"] == {n.name: 2 for n in sync.nodes} and not plan.fabric["idle_half"]
    assert not any("other half is idle" in w for w in plan.warnings), plan.warnings
    assert [n.rdma for n in plan.nodes] == [f"{n.rdma},{n.twin_rdma}" for n in sync.nodes]
    assert v.ok, v.summary()
    assert sorted(h.rail["subnet"] for h in v.halves) == [sync.fabric_subnet, sync.twin_subnet]
    assert all(h.ok for h in v.halves), [h.to_json() for h in v.halves]
    assert leftover_containers(sync) == {}


async def test_a_half_that_goes_down_after_the_plan_is_named_by_the_preflight(sync):
    worker = sync.nodes[1]
    try:
        v, plan, _ = await check(sync, before=lambda: sync.twin_link_down(worker))
    finally:
        sync.twin_link_up(worker)
    assert plan.fabric["halves_in_use"][worker.name] == 2  # planned while both halves worked
    assert all(r.ok for r in v.nodes.values())  # the rendezvous on the first half still met
    assert not v.ok
    assert f"the fabric half {worker.name} {worker.twin_iface} ({worker.twin_rdma}) on {sync.twin_subnet}" in v.reason
    assert f"`ip link show {worker.twin_iface}` on {worker.name}" in v.fix
    assert leftover_containers(sync) == {}


async def test_a_half_whose_traffic_a_namespace_rule_drops_is_named(sync):
    if shutil.which("iptables") is None:
        pytest.skip("needs iptables for the node's own rule")
    worker = sync.nodes[1]
    rule = ["OUTPUT", "-o", worker.twin_iface, "-j", "DROP"]
    try:
        v, _, _ = await check(sync, before=lambda: sync.sh(worker, ["iptables", "-I", *rule]))
    finally:
        sync.sh(worker, ["iptables", "-D", *rule], check=False)
    assert not v.ok and f"{worker.name} {worker.twin_iface}" in v.reason, v.summary()


async def test_a_management_bootstrap_with_data_on_both_halves_is_accepted(sync):
    v, plan, _ = await check(sync, rendezvous=sync.mgmt_subnet)
    assert not [e for e in plan.errors if "model directory" not in e], plan.errors  # the lab holds no model
    assert plan.subnet == sync.mgmt_subnet and plan.head_ip == sync.head.mgmt_ip
    assert not any("NCCL would run over TCP" in w for w in plan.warnings), plan.warnings
    assert any("bootstrap over the management port" in n for n in plan.notes), plan.notes
    assert plan.fabric["paths"]["data"]["subnet"] == sync.fabric_subnet
    assert [n.rdma for n in plan.nodes] == [f"{n.rdma},{n.twin_rdma}" for n in sync.nodes]
    assert v.ok, v.summary()
    assert len(v.halves) == 2 and all(h.ok for h in v.halves)


async def test_a_rendezvous_the_peers_cannot_reach_is_still_refused_with_the_fabric_to_choose(sync):
    # wlan0 joins every node but drops every packet between them: SGLang's queue on the Wi-Fi address
    v, plan, _ = await check(sync, timeout=12, rendezvous=sync.wlan_subnet)
    assert plan.subnet == sync.wlan_subnet
    assert not v.ok and v.root.kind == "unreachable", v.summary()
    assert f"{sync.head.wlan_ip}:{v.setting.port}" in v.reason
    assert sync.fabric_subnet in v.fix
