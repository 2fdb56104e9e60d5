"""Plans without the nodes: `plan --facts FILE` (a saved `check --json`) and `plan --offline` (the facts
the last probe kept), and a plan with errors whose commands are marked as not runnable."""

from __future__ import annotations

import json
import os
import time

import pytest

from sparktui.cli import main
from sparktui.core.nodes import facts_store
from sparktui.core.nodes.inventory import Inventory

from .test_plan import MODEL, cluster

# Nobody answers on port 9: were anything dialled, it would fail, and the fake Cluster below fails first.
CONFIG = f"""\
cluster: sparks
nodes:
  - {{name: spark1, host: 127.0.0.1, port: 9, role: head}}
  - {{name: spark2, host: 127.0.0.2, port: 9}}
model: {{name: qwen, path: {MODEL}}}
images: {{sglang: lmsysorg/sglang:latest-cu130, vllm: nvcr.io/nvidia/vllm:26.10-py3}}
ssh: {{connect_timeout: 1}}
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)

    def no_dial(*a, **k):
        raise AssertionError("an offline plan dialled a node")

    monkeypatch.setattr("sparktui.core.remote.ssh.Cluster", no_dial)
    from sparktui.cli import common

    monkeypatch.setattr(common.err_console, "width", 1000)  # a message is one line: no wrapping to read past
    _, facts, subnets = cluster(2)
    for i, f in enumerate(facts.values()):
        f.host = f"127.0.0.{i + 1}"
    return cfg, facts, subnets


def _check_json(facts, subnets) -> dict:
    """What `sparktui check --json` prints (cli/check.py: the inventory's JSON plus requirements)."""
    return {**Inventory(facts=facts, subnets=subnets).to_json(), "requirements": []}


def test_plan_from_a_saved_check_json_with_every_node_unreachable(env, tmp_path, capsys):
    cfg, facts, subnets = env
    saved = tmp_path / "check.json"
    saved.write_text(json.dumps(_check_json(facts, subnets)))
    os.utime(saved, (1_790_000_000, 1_790_000_000))
    assert main(["--config", str(cfg), "plan", "--facts", str(saved), "--engine", "vllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["errors"] == [] and out["runnable"] is True
    assert out["rendezvous"]["subnet"] == "192.168.100.0/24"
    assert all(n["commands"] for n in out["nodes"])
    # says where the facts came from and from when (the file's time: check --json carries none)
    assert any(w.startswith("offline:") and str(saved) in w and "2026-09-21" in w for w in out["warnings"])


def test_offline_plans_from_the_last_probe_and_says_from_when(env, capsys):
    cfg, facts, _ = env
    hosts = {n: f.host for n, f in facts.items()}
    t1 = time.time() - 3 * 3600
    assert facts_store.remember("sparks", hosts, facts, now=t1) is None
    # a later probe that reached only spark1: spark2 keeps the facts it had
    later = {"spark1": facts["spark1"], "spark2": type(facts["spark2"])("spark2", "127.0.0.2", reachable=False)}
    assert facts_store.remember("sparks", hosts, later, now=t1 + 3600) is None
    path = facts_store.store_path("sparks")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert main(["--config", str(cfg), "plan", "--offline", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["errors"] == [] and all(n["commands"] for n in out["nodes"])
    note = next(w for w in out["warnings"] if w.startswith("offline:"))
    assert "spark1 at " in note and "(2 h ago)" in note and "spark2 at " in note and "(3 h ago)" in note


def test_offline_without_kept_facts_says_how_to_get_them(env, capsys):
    cfg, _, _ = env
    assert main(["--config", str(cfg), "plan", "--offline"]) == 1
    err = capsys.readouterr().err
    assert "no facts kept for cluster sparks" in err and "sparktui check" in err and "--facts FILE" in err


@pytest.mark.parametrize(
    "content,words",
    [
        ("{not json", "not valid JSON"),
        ('{"nodes": {"spark1": 1}}', "facts file version None"),
        ("[1, 2]", "not a facts file"),
        ('{"nodes": [{"name": "spark1", "gpu": {"count": "x"}}]}', "nodes[0].gpu.count: expected a whole number"),
        ('{"nodes": [{"name": "spark1", "gpu": {"utilization": Infinity}}]}', "not valid JSON"),
        ('{"nodes": [{"name": "spark1", "interfaces": {"a": 1}}]}', "nodes[0].interfaces: expected a list"),
        ('{"nodes": [{"name": "spark1", "docker": {"images": ["x"]}}]}', "nodes[0].docker.images: expected an object"),
        ('{"nodes": [{"gpu": {}}]}', "nodes[0].name"),
        ('{"nodes": [{"name": "spark1", "reachable": "yes"}]}', "nodes[0].reachable: expected true or false"),
    ],
)
def test_a_bad_facts_file_is_one_line_and_exit_2(env, tmp_path, capsys, content, words):
    cfg, _, _ = env
    bad = tmp_path / "facts.json"
    bad.write_text(content)
    with pytest.raises(facts_store.FactsFileError) as e:
        facts_store.load_file(bad, ["spark1", "spark2"], {})
    assert str(bad) in str(e.value) and words in str(e.value) and "\n" not in str(e.value)
    assert main(["--config", str(cfg), "plan", "--facts", str(bad)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_directory_or_a_corrupt_kept_file_is_one_line(env, tmp_path, capsys):
    cfg, _, _ = env
    assert main(["--config", str(cfg), "plan", "--facts", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    path = facts_store.store_path("sparks")
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "nodes": {"spark1": {"taken_at": "x", "facts": {}}}}')
    assert main(["--config", str(cfg), "plan", "--offline"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "nodes.spark1.taken_at: expected a number" in err and f"delete {path}" in err
    with pytest.raises(facts_store.FactsFileError) as e:
        facts_store.load_last("sparks", ["spark1"], {})
    assert "\n" not in str(e.value)


def test_a_probe_replaces_a_corrupt_kept_file(env):
    _, facts, _ = env
    path = facts_store.store_path("sparks")
    path.parent.mkdir(parents=True)
    path.write_text("garbage")
    assert facts_store.remember("sparks", {n: f.host for n, f in facts.items()}, facts) is None
    saved = facts_store.load_last("sparks", list(facts), {n: f.host for n, f in facts.items()})
    assert saved.facts["spark2"].interfaces[1].rdma == "rocep1s0f1" and saved.facts["spark2"].gpu.unified


def test_kept_facts_of_a_node_that_moved_are_not_used(env):
    _, facts, _ = env
    facts_store.remember("sparks", {n: f.host for n, f in facts.items()}, facts)
    saved = facts_store.load_last("sparks", list(facts), {"spark1": "127.0.0.1", "spark2": "127.0.0.99"})
    assert saved.facts["spark1"].reachable and not saved.facts["spark2"].reachable


def test_a_plan_with_errors_marks_its_commands_as_not_runnable(env, tmp_path, capsys):
    cfg, facts, subnets = env
    facts["spark2"].model.present = False  # an error, and the plan still has its commands
    saved = tmp_path / "check.json"
    saved.write_text(json.dumps(_check_json(facts, subnets)))
    assert main(["--config", str(cfg), "plan", "--facts", str(saved), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["runnable"] is False and doc["errors"] and any(n["commands"] for n in doc["nodes"])
    assert main(["--config", str(cfg), "plan", "--facts", str(saved)]) == 1
    text = capsys.readouterr().out
    assert "NOT RUNNABLE" in text
    runnable = [ln for ln in text.splitlines() if ln.strip("│ ").startswith(("docker ", "sh "))]
    assert runnable == [], runnable  # every command line is commented out
    out = tmp_path / "export"
    assert main(["--config", str(cfg), "plan", "--facts", str(saved), "--export", str(out)]) == 1
    script = out / "0-spark1.sh"
    assert not os.access(script, os.X_OK)
    import subprocess

    r = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "this plan has errors, nothing was run" in r.stderr and "missing" in r.stderr
