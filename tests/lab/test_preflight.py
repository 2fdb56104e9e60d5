"""The rendezvous preflight on lab nodes: real sshd and dockerd per node, the engine simulator's image
(a bare python3, so the check takes its TCP path), the fabric and the blackholed "wlan" subnet."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.core.config.config import load_config
from sparktui.core.nodes.inventory import take_inventory
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.preflight import run_preflight
from sparktui.core.remote.ssh import Cluster

from .netlab import SIM_IMAGE, Lab

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
BOUND = 40.0  # a verdict, ok or not, within this many seconds at the default 30 s timeout


@pytest.fixture(scope="module")
def sim(lab: Lab, tmp_path_factory) -> Lab:
    """The lab with the simulator image on every node."""
    if not all(r.returncode == 0 for r in lab.on_each(["docker", "image", "inspect", SIM_IMAGE], check=False).values()):
        tar = tmp_path_factory.mktemp("sim") / "sim.tar"
        subprocess.run(
            [sys.executable, str(REPO / "tools" / "build_sim_image.py"), "-o", str(tar)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        lab.load_image(tar)
    return lab


def leftover_containers(lab: Lab) -> dict[str, str]:
    out = lab.on_each(["docker", "ps", "-a", "--filter", "name=sparktui-preflight-", "--format", "{{.Names}}"])
    return {name: r.stdout.strip() for name, r in out.items() if r.stdout.strip()}


async def check(lab: Lab, timeout: float = 30.0, before=None, **opts):
    """(verdict, plan, seconds the check took) for a plan over the lab's own inventory; before() runs
    between the plan and the check (a fault that happens after the plan was made)."""
    config = load_config(lab.config_path)
    async with Cluster(config) as cluster:
        inv = await take_inventory(cluster, config)
        plan = make_plan(config, inv.facts, inv.subnets, PlanOptions(**opts))
        if before is not None:
            before()
        t0 = time.monotonic()
        verdict = await run_preflight(cluster, config, plan, timeout=timeout, subnets=inv.subnets)
        return verdict, plan, time.monotonic() - t0


async def test_ok_on_the_fabric(sim):
    v, plan, took = await check(sim)
    assert v.ok, v.summary()
    assert took < BOUND
    # the bandwidth as a share of what the link could carry: one half of the port in use (the twin is down)
    speed = int(sim.sh(sim.head, f"cat /sys/class/net/{sim.head.fabric_iface}/speed").stdout)
    assert plan.fabric["halves_in_use"] == {n.name: 1 for n in sim.nodes}
    assert v.line_rate_gb_s == speed / 2 / 8000
    assert v.to_json()["line_rate_share"] == round(v.bandwidth_gb_s / v.line_rate_gb_s, 3)
    assert "% of line rate" in v.summary()
    assert plan.subnet == sim.fabric_subnet and v.setting.addr == sim.head.fabric_ip
    assert v.transport == "tcp"  # the simulator's image has no torch
    for n in sim.nodes:
        r = v.nodes[n.name]
        assert r.ok and r.ip == n.fabric_ip and r.iface == n.fabric_iface and r.path == "tcp"
    assert leftover_containers(sim) == {}


async def test_a_node_whose_fabric_link_is_down_names_the_unreachable_address(sim):
    worker = sim.nodes[1]
    try:
        # the cable comes out after the plan was made on the fabric
        v, plan, took = await check(sim, before=lambda: sim.link_down(worker))
    finally:
        sim.link_up(worker)
    assert plan.subnet == sim.fabric_subnet
    assert not v.ok
    assert took < BOUND
    head = f"{sim.head.fabric_ip}:{v.setting.port}"
    assert v.root.node == worker.name and v.root.kind == "unreachable", v.summary()
    assert f"{head} is unreachable from {worker.name}" in v.reason
    assert v.nodes[sim.head.name].kind in ("peer_missing", "stopped")
    assert any(worker.fabric_iface in w and "carrier" in w for w in v.warnings)
    assert leftover_containers(sim) == {}


async def test_a_forced_interface_name_the_nodes_lack_fails_at_once(sim):
    v, plan, took = await check(sim, env={"NCCL_SOCKET_IFNAME": "enp9s9"})
    assert not v.ok and took < 10
    assert v.root.kind == "interface_missing" and "NCCL_SOCKET_IFNAME=enp9s9" in v.reason
    assert "--iface" in v.fix
    assert leftover_containers(sim) == {}


async def test_the_blackholed_wlan_subnet_hangs_until_the_timeout_and_is_named(sim):
    # Every node has wlan0 on one subnet, but packets between them vanish: what SGLang's queue meets
    # when it picks the Wi-Fi address.
    v, plan, took = await check(sim, timeout=12, rendezvous=sim.wlan_subnet)
    assert plan.subnet == sim.wlan_subnet
    assert not v.ok and took < 12 + 15
    assert v.root.kind == "unreachable" and v.root.node == sim.nodes[1].name
    assert f"{sim.head.wlan_ip}:{v.setting.port}" in v.reason and "timed out" in v.reason
    assert sim.fabric_subnet in v.fix  # the subnet that does join all nodes
    assert leftover_containers(sim) == {}


def test_the_command_line_prints_the_verdict_as_json(sim, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert main(["preflight", "--config", str(sim.config_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["rendezvous"]["addr"] == sim.head.fabric_ip
    assert [n["node"] for n in out["nodes"]] == [n.name for n in sim.nodes]
    assert leftover_containers(sim) == {}


# A Spark right after receiving the checkpoint: most of its memory is page cache.
AFTER_COPY = (
    "MemTotal:       125514352 kB\nMemFree:         9832112 kB\nMemAvailable:   119883220 kB\n"
    "Buffers:          112640 kB\nCached:        108240512 kB\n"
)


def test_a_node_full_of_page_cache_fails_the_check_with_drop_caches_offered(sim, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    worker = sim.nodes[1]
    sim.set_meminfo(worker, AFTER_COPY)  # what the node's /proc/meminfo says over SSH from now on
    try:
        rc = main(["preflight", "--config", str(sim.config_path), "--json"])
    finally:
        sim.set_meminfo(worker)
    out = json.loads(capsys.readouterr().out)
    rows = {n["node"]: n for n in out["nodes"]}
    assert rc == 1 and not out["ok"] and out["failed"] == [worker.name]
    assert rows[worker.name]["kind"] == "memory" and rows[worker.name]["transport"] == "tcp"  # it met the head
    assert rows[worker.name]["memory"]["free"] == 9832112 * 1024 and rows[worker.name]["memory"]["cache_would_do"]
    assert rows[sim.head.name]["ok"] and rows[sim.head.name]["memory"]["short"] is False
    assert out["drop_caches"] == [worker.name] and f"sparktui drop-caches {worker.name}" in out["fix"]
    assert leftover_containers(sim) == {}


def test_launch_refuses_a_failed_preflight_and_starts_nothing(sim, capsys, monkeypatch, tmp_path):
    from tests.simhelpers import make_model

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    for n in sim.nodes:  # a valid plan otherwise: the model is on every node
        if not (n.path / "models" / sim.model / "config.json").exists():
            make_model(n.path / "models" / sim.model, shards=2, total_bytes=1 << 30)

    def deployment_containers() -> dict[str, str]:
        out = sim.on_each(["docker", "ps", "-a", "--filter", "label=sparktui.deployment", "--format", "{{.Names}}"])
        return {name: r.stdout.strip() for name, r in out.items()}

    before = deployment_containers()
    rc = main(
        [
            "launch",
            "--config",
            str(sim.config_path),
            "--engine",
            "sglang",
            "--yes",
            "--env",
            "NCCL_SOCKET_IFNAME=enp9s9",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1
    assert "NCCL_SOCKET_IFNAME=enp9s9" in err and "--force" in err
    assert deployment_containers() == before  # no engine container was started
    assert leftover_containers(sim) == {}
