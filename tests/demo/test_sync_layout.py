"""The demo brought up as NVIDIA Sync writes a fabric: each half of the port on a subnet of its own. The plan
uses both halves with no idle half, check says the layout, the preflight proves both halves' subnets."""

from __future__ import annotations

import json

import pytest

from sparktui.demo.runner import ThreadedDemo

from .conftest import cli_env, require_namespaces, small, sparktui  # noqa: F401 - cli_env is a fixture


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    require_namespaces()
    runner = ThreadedDemo(small(tmp_path_factory.mktemp("demo"), layout="sync"))
    cluster = runner.start()
    yield cluster
    runner.stop()


async def test_plan_check_and_preflight_read_both_halves(demo, cli_env):
    cfg = ["--config", str(demo.config_path)]
    rc, out, err = await sparktui(cli_env, *cfg, "plan", "--engine", "sglang", "--json")
    plan = json.loads(out)
    assert plan["rendezvous"]["subnet"] == "127.0.1.0/24", err  # the rendezvous stays on the fabric
    assert plan["fabric"]["halves_in_use"] == {"spark1": 2, "spark2": 2} and not plan["fabric"]["idle_half"]
    assert not any("idle" in w for w in plan["warnings"]), plan["warnings"]
    assert plan["nodes"][1]["env"]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"

    rc, out, err = await sparktui(cli_env, *cfg, "check")
    assert "fabric layout: direct, per-half subnets" in out, out + err

    rc, out, err = await sparktui(cli_env, *cfg, "preflight", "--engine", "sglang", "--json", timeout=180)
    pre = json.loads(out)
    assert rc == 0 and pre["ok"], out + err
    assert sorted(h["subnet"] for h in pre["halves"]) == ["127.0.1.0/24", "127.0.3.0/24"]
    assert all(h["ok"] for h in pre["halves"]), pre["halves"]
