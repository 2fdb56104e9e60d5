"""sparktui's own state files after a crash, a full disk or a hand edit: a cut-off last line, numbers out of
range, Rich markup in strings, an unwritable journal, an interrupted facts write."""

from __future__ import annotations

import json

import pytest

from sparktui.cli import main
from sparktui.core.nodes import facts_store
from sparktui.core.bench import results
from sparktui.core.state.journal import Journal, tail_journal

from .test_bench import row
from .test_plan_offline import env  # noqa: F401  (the fixture)


def test_a_cut_off_journal_line_does_not_swallow_the_next_entry(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text('{"node": "a", "started": 1.0, "comm')  # a write cut off by a crash
    j = Journal(path)
    j.finish(j.start("spark1", "docker ps"), 0)
    tail = tail_journal(path)
    assert [e.command for e in tail.entries] == ["docker ps"] and tail.skipped == 1
    j.finish(j.start("spark1", "uptime"), 0)  # and after a whole line, no blank one
    assert path.read_bytes().count(b"\n") == 3


def test_a_cut_off_bench_row_does_not_swallow_the_next_rows(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text('{"deployment": "lab", "engi')
    results.append([row("vllm", 1), row("vllm", 8)], path)
    rows, problems = results.load(path)
    assert [r.concurrency for r in rows] == [1, 8] and len(problems) == 1 and f"{path}:1" in problems[0]


def test_an_overlong_bench_line_is_skipped_without_losing_the_rest(tmp_path):
    path = tmp_path / "bench.jsonl"
    results.append([row("vllm", 1)], path)
    with path.open("a") as f:
        f.write("x" * (results.MAX_LINE * 3) + "\n")
    results.append([row("vllm", 8)], path)
    rows, problems = results.load(path)
    assert [r.concurrency for r in rows] == [1, 8] and "longer than" in problems[0] and f"{path}:2" in problems[0]


@pytest.mark.parametrize("json_out", [False, True])
def test_bench_history_with_far_timestamps_and_markup(tmp_path, monkeypatch, capsys, json_out):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    rows = [row("vllm", 1, started=1e300), row("vllm", 8, started=-1e18), row("vllm", 8, image="[/x]", plan_id="[b")]
    results.append(rows)
    assert main(["bench", "--history", *(["--json"] if json_out else [])]) == 0
    out, err = capsys.readouterr()
    assert "'started' is 1e+300, outside 0..1e+11" in err and "1 more damaged lines skipped" in err
    if json_out:
        assert [r["image"] for r in json.loads(out)["rows"]] == ["[/x]"]
    else:
        assert "[/x]" in out and "[b" in out


@pytest.mark.parametrize("json_out", [False, True])
def test_plan_offline_with_a_far_taken_at_and_markup_in_the_facts(env, capsys, json_out):  # noqa: F811
    cfg, facts, _ = env
    facts_store.remember("sparks", {n: f.host for n, f in facts.items()}, facts)
    path = facts_store.store_path("sparks")
    doc = json.loads(path.read_text())
    node = doc["nodes"]["spark1"]
    node["taken_at"] = 1e300
    node["facts"]["docker"]["images"]["[/x]"] = "sha256:1"
    node["facts"]["containers"] = [
        {"id": "c", "name": "[/x]", "image": "[/x]", "state": "running", "status": "[/x]", "labels": {}}
    ]
    for i in node["facts"]["interfaces"]:
        i["name"] = "[/x]" + i["name"]
    path.write_text(json.dumps(doc))
    assert main(["--config", str(cfg), "plan", "--offline", *(["--json"] if json_out else [])]) == 0
    out = capsys.readouterr().out
    if json_out:
        assert any("spark1 at an unknown time" in w for w in json.loads(out)["warnings"])
    else:
        assert "spark1 at an unknown time" in out and "[/x]" in out


def test_an_unwritable_journal_is_said_once_naming_the_path(tmp_path, monkeypatch, capsys):
    (tmp_path / "state").write_text("a file where the state directory should be")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    from sparktui.cli import common

    j = common.journal()
    for _ in range(3):
        j.finish(j.start("spark1", "docker ps"), 0)
    err = capsys.readouterr().err
    assert err.count("warning: the journal cannot be written") == 1
    assert str(tmp_path / "state" / "sparktui" / "journal.jsonl") in err.replace("\n", "") and "Not a directory" in err


def _no_temp(directory) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_facts_write_leaves_no_temp_file(env, monkeypatch):  # noqa: F811
    _, facts, _ = env
    hosts = {n: f.host for n, f in facts.items()}
    bad = {n: f for n, f in facts.items()}
    next(iter(bad.values())).gpu.utilization = float("nan")  # JSON cannot carry it
    assert "could not keep the node facts" in facts_store.remember("sparks", hosts, bad)
    assert _no_temp(facts_store.state_dir()) == []

    def interrupted(*_):
        raise KeyboardInterrupt

    next(iter(bad.values())).gpu.utilization = None
    monkeypatch.setattr(facts_store.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        facts_store.remember("sparks", hosts, bad)
    assert _no_temp(facts_store.state_dir()) == []
