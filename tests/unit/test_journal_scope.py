"""`sparktui journal` shows the config's cluster by default; `--all` every cluster's commands."""

from __future__ import annotations

import json

from sparktui.cli import main
from sparktui.core.config.config import load_config
from sparktui.core.state.journal import Journal, default_journal_path, read_journal
from sparktui.core.remote.ssh import Cluster

CONFIG = """cluster: {name}
nodes: [{{name: a, host: 127.0.0.1}}]
model: {{name: m, path: /m}}
images: {{sglang: s, vllm: v}}
"""


def _config(tmp_path, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(CONFIG.format(name=name))
    return path


def _record(journal: Journal, node: str, command: str) -> None:
    journal.finish(journal.start(node, command), 0)


def test_a_cluster_records_its_name_with_every_command(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    Cluster(load_config(_config(tmp_path, "lab")), journal=j)
    _record(j, "a", "true")
    assert [e.cluster for e in read_journal(tmp_path / "j.jsonl")] == ["lab"]


def test_journal_is_scoped_to_the_config_and_all_shows_every_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = default_journal_path()
    real, demo = Journal(path, cluster="lab"), Journal(path, cluster="DEMO — simulated cluster")
    for i in range(3):
        _record(real, "a", f"echo real{i}")
        _record(demo, "spark1", f"echo demo{i}")
    path.open("a").write(json.dumps({"node": "x", "started": 1.0, "command": "echo old"}) + "\n")
    cfg = _config(tmp_path, "lab")

    assert main(["journal", "--config", str(cfg), "--json", "--limit", "2"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [e["command"] for e in shown] == ["echo real1", "echo real2"]  # the latest of this cluster
    assert main(["journal", "--all", "--json"]) == 0
    every = [e["command"] for e in json.loads(capsys.readouterr().out)]
    assert "echo demo2" in every and "echo real0" in every and "echo old" in every
    assert main(["--config", str(cfg), "journal"]) == 0
    out = capsys.readouterr().out
    assert "cluster lab" in out and "echo real0" in out and "demo" not in out.replace("--all", "")


def test_journal_without_a_config_points_at_all(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    monkeypatch.delenv("SPARKTUI_CONFIG", raising=False)
    assert main(["journal"]) == 2
    assert "--all" in capsys.readouterr().err
