"""`--json` refusals on lab nodes (real sshd, real links): the document names what is wrong, on stdout."""

from __future__ import annotations

import json

import pytest

from sparktui.cli import main

from .netlab import Lab

pytestmark = pytest.mark.lab


def test_preflight_json_with_a_fabric_cable_out_names_the_node_and_its_link(lab: Lab, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    worker = lab.nodes[1]
    lab.link_down(worker)  # before the plan: the plan itself cannot rendezvous, nothing is started
    try:
        rc = main(["preflight", "--config", str(lab.config_path), "--json"])
    finally:
        lab.link_up(worker)
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert rc == 1, cap.err
    assert {"error", "reason"} <= set(doc)
    assert worker.name in doc["reason"] and worker.fabric_iface in doc["reason"], doc
