"""The demo's `ping`: answered from the nodes' descriptions, so a half taken down stops answering."""

from __future__ import annotations

import json

from sparktui.demo import hardware
from sparktui.demo.tools import ping


def _demo(tmp_path, monkeypatch, layout: str):
    nodes = []
    for k, name in ((1, "spark1"), (2, "spark2")):
        d = tmp_path / name
        d.mkdir()
        (d / "node.json").write_text(json.dumps(hardware.describe(k, name, layout)))
        nodes.append({"name": name, "dir": str(d)})
    (tmp_path / "demo.json").write_text(json.dumps({"nodes": nodes}))
    monkeypatch.setenv(hardware.ROOT_ENV, str(tmp_path))
    monkeypatch.setenv(hardware.NODE_ENV, str(tmp_path / "spark2"))


def test_each_half_answers_on_its_own_subnet_until_it_goes_down(tmp_path, monkeypatch, capsys):
    _demo(tmp_path, monkeypatch, "sync")
    assert ping.main(["-n", "-q", "-c", "3", "-I", "enP2p1s0f1np1", "127.0.3.11"]) == 0
    assert "3 packets transmitted, 3 received" in capsys.readouterr().out
    assert ping.main(["-c", "3", "-I", "enP2p1s0f1np1", "127.0.1.11"]) == 1  # the other half's subnet
    capsys.readouterr()
    node = json.loads((tmp_path / "spark1" / "node.json").read_text())
    next(i for i in node["interfaces"] if i["name"] == "enP2p1s0f1np1")["up"] = False
    (tmp_path / "spark1" / "node.json").write_text(json.dumps(node))
    assert ping.main(["-c", "3", "-I", "enP2p1s0f1np1", "127.0.3.11"]) == 1
    assert "3 packets transmitted, 0 received" in capsys.readouterr().out


def test_a_fresh_sparks_twin_cannot_send(tmp_path, monkeypatch, capsys):
    _demo(tmp_path, monkeypatch, "fresh")
    assert ping.main(["-c", "3", "-I", "enP2p1s0f1np1", "127.0.3.11"]) == 2
    assert "Network is unreachable" in capsys.readouterr().out
    assert ping.main(["-c", "3", "-I", "enp1s0f1np1", "127.0.1.11"]) == 0
