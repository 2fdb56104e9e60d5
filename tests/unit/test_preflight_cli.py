"""`sparktui preflight`: the plan options reach the plan, the verdict decides the exit code and the JSON.

The cluster, the probe and the check itself are replaced by fakes over synthetic facts: nothing is dialled.
"""

from __future__ import annotations

import json

import pytest

from sparktui.cli import build_parser, main
from sparktui.core.preflight import NodeResult, Setting, Verdict

from tests.fakes import FakeCluster, fixed_inventory
from .test_plan import cluster
from .test_plan_cli import CONFIG


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Config file, and a record of what run_preflight was given; set record["fail"] to fail node spark2."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cfg_file = tmp_path / "sparktui.yaml"
    cfg_file.write_text(CONFIG)
    _, facts, subnets = cluster(2)
    record: dict = {}

    async def fake_run(
        cl, config, plan, timeout, *, subnets=None, mode="auto", on_node=None, rails=False, start_window, on_stage
    ):
        record.update(plan=plan, timeout=timeout, mode=mode, subnets=subnets, rails=rails, start_window=start_window)
        s = Setting(addr=plan.head_ip, port=plan.dist_port + 1, subnet=plan.subnet, image=plan.image, timeout=timeout)
        v = Verdict(setting=s, seconds=1.5, check_id="abc")
        for n in plan.nodes:
            bad = record.get("fail") == n.name
            r = NodeResult(
                node=n.name,
                rank=n.rank,
                iface=n.iface,
                ip=n.ip,
                ok=not bad,
                transport=None if bad else "rdma",
                bandwidth_gb_s=None if bad else 21.5,
                kind="unreachable" if bad else None,
                reason="10.9.9.9:1 is unreachable" if bad else None,
                fix="check the link" if bad else None,
            )
            v.nodes[n.name] = r
            if on_node:
                on_node(r)
        return v

    monkeypatch.setattr("sparktui.cli.preflight.Cluster", FakeCluster.replacing())
    monkeypatch.setattr("sparktui.core.nodes.inventory.take_inventory", fixed_inventory(facts, subnets))
    monkeypatch.setattr("sparktui.core.preflight.run_preflight", fake_run)
    return cfg_file, record


def test_plan_options_reach_the_check_and_ok_exits_0(fake, capsys):
    cfg_file, record = fake
    assert (
        main(
            [
                "preflight",
                "--config",
                str(cfg_file),
                "--dist-port",
                "29600",
                "--timeout",
                "12",
                "--start-window",
                "45",
                "--via",
                "tcp",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["transport"] == "rdma" and out["bandwidth_gb_s"] == 21.5
    assert out["rendezvous"] == {"addr": "192.168.100.10", "port": 29601, "subnet": "192.168.100.0/24"}
    assert out["plan"]["engine"] == "sglang"
    plan = record["plan"]
    assert plan.dist_port == 29600 and [n.name for n in plan.nodes] == ["spark1", "spark2"]
    assert (record["timeout"], record["mode"], record["rails"]) == (12.0, "tcp", False)
    assert record["start_window"] == 45.0
    assert record["subnets"]  # the inventory's subnets, so a failure can suggest another
    assert main(["preflight", "--config", str(cfg_file), "--rails", "--json"]) == 0
    assert record["rails"] is True  # each RDMA half measured alone after the check


def test_a_failed_check_exits_1_and_says_why(fake, capsys):
    cfg_file, record = fake
    record["fail"] = "spark2"
    assert main(["preflight", "--config", str(cfg_file)]) == 1
    captured = capsys.readouterr()
    assert "preflight FAILED" in captured.out and "10.9.9.9:1 is unreachable" in captured.out
    assert "try: check the link" in captured.out
    assert "spark2: failed (unreachable)" in captured.err  # progress as each node reports


def test_bad_input_exits_2(fake, capsys):
    cfg_file, record = fake
    with pytest.raises(SystemExit) as e:  # refused while the arguments are read
        main(["preflight", "--config", str(cfg_file), "--timeout", "0"])
    assert e.value.code == 2
    assert main(["preflight", "--config", str(cfg_file), "--iface", "172.31.0.0/24"]) == 2  # joins nothing
    assert "nothing to check" in capsys.readouterr().err
    assert "plan" not in record  # no check ran
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["preflight", "--via", "rdma"])
    assert e.value.code == 2
