"""The journal file: damaged lines are skipped with one line saying so, numbers stay finite, the file is
0600, rotated by size, and read from the end in memory bounded by --limit, not by the file."""

from __future__ import annotations

import json
import os
import stat
import tracemalloc
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.core.state.journal import Journal, default_journal_path, read_journal, tail_journal
from sparktui.core.state.statefile import StateFileError


def _strict(text: str):
    """json.loads that refuses NaN and Infinity, as every other JSON reader does."""

    def bad(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=bad)


@pytest.fixture
def jpath(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return default_journal_path()


def _good(j: Journal, n: int) -> None:
    for i in range(n):
        j.finish(j.start("a", f"echo {i}"), 0)


@pytest.mark.parametrize(
    "field,value",
    [
        ("started", '"x"'),
        ("started", "1e400"),
        ("started", "null"),
        ("exit_status", '"0"'),
        ("duration", "[1]"),
        ("command", '{"a": 1}'),
        ("started", "1" + "0" * 400),
        ("started", "-5.0"),
        ("node", "NaN"),
    ],
)
def test_a_line_of_the_wrong_type_is_skipped_and_said_in_one_line(jpath, capsys, field, value):
    _good(Journal(jpath), 2)
    fields = {"node": '"a"', "started": "1.0", "command": '"bad"', field: value}
    line = "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"
    with jpath.open("a") as f:
        f.write(line + "\n")
    assert main(["journal", "--all"]) == 0
    cap = capsys.readouterr()
    assert "echo 0" in cap.out and "echo 1" in cap.out and "bad" not in cap.out
    assert "Traceback" not in cap.err and len(cap.err.strip().splitlines()) == 1
    assert "1 unreadable journal line(s) skipped" in cap.err and str(jpath) in cap.err
    assert (field if value not in ("1e400", "NaN") else value.replace("1e400", "out of range")) in cap.err


def test_json_output_has_no_infinity_or_nan(jpath, capsys):
    _good(Journal(jpath), 1)
    with jpath.open("a") as f:
        f.write('{"node": "a", "started": 1e400, "command": "x"}\n{"node": "a", "started": NaN, "command": "y"}\n')
        f.write('{"node": "a", "started": 2.0, "command": "z", "duration": Infinity}\n')
    assert main(["journal", "--all", "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert [e["command"] for e in out] == ["echo 0"]


def test_a_journal_that_is_a_directory_is_one_line_and_exit_1(jpath, capsys):
    jpath.mkdir(parents=True)
    assert main(["journal", "--all"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(jpath) in err and "directory" in err
    Journal(jpath).finish(Journal(jpath).start("a", "true"), 0)  # writing to it still breaks nothing


def test_the_file_is_0600_even_when_an_older_one_was_0644(jpath):
    _good(Journal(jpath), 1)
    assert stat.S_IMODE(jpath.stat().st_mode) == 0o600
    os.chmod(jpath, 0o644)
    _good(Journal(jpath), 1)
    assert stat.S_IMODE(jpath.stat().st_mode) == 0o600


def test_rotation_keeps_one_generation_and_reading_spans_both(jpath):
    j = Journal(jpath, max_bytes=2000)
    _good(j, 60)  # some 120 bytes a line: three rotations' worth
    rotated = jpath.with_name(jpath.name + ".1")
    assert rotated.exists() and jpath.stat().st_size <= 2000 and rotated.stat().st_size <= 2000
    assert not jpath.with_name(jpath.name + ".2").exists()
    assert stat.S_IMODE(rotated.stat().st_mode) == 0o600
    kept = len(read_journal(jpath, 1000))
    latest = read_journal(jpath, kept)
    assert [e.command for e in latest] == [f"echo {i}" for i in range(60 - kept, 60)]  # in order, none twice
    assert kept > 2000 // 150  # more than the current file alone holds


def test_the_latest_entries_of_a_large_journal_are_read_in_bounded_memory(jpath):
    jpath.parent.mkdir(parents=True)
    line = json.dumps({"node": "a", "started": 1.0, "command": "x" * 200, "cluster": "c"}).encode() + b"\n"
    with jpath.open("wb") as f:
        for _ in range(40):
            f.write(line * 2500)  # 40 x 0.55 MB: some 22 MB
        f.write(json.dumps({"node": "a", "started": 2.0, "command": "last", "cluster": "c"}).encode() + b"\n")
    tracemalloc.start()
    try:
        got = read_journal(jpath, 5, cluster="c")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [e.command for e in got][-1] == "last" and len(got) == 5
    assert peak < 1_000_000, peak  # the file is 22 MB; a whole read would peak far above it


def test_an_overlong_line_is_skipped_without_being_held(jpath):
    j = Journal(jpath)
    _good(j, 1)
    with jpath.open("a") as f:
        f.write("x" * 3_000_000 + "\n")
    _good(j, 1)
    tail = tail_journal(jpath, 10)
    assert [e.command for e in tail.entries] == ["echo 0", "echo 0"] and tail.skipped == 1
    assert "longer than" in tail.warning()


def test_an_unreadable_journal_raises_the_loader_error(jpath):
    jpath.mkdir(parents=True)
    with pytest.raises(StateFileError) as e:
        tail_journal(jpath, 5)
    assert e.value.where == str(jpath)


def test_a_cluster_named_in_any_script_is_found_as_written_escaped_or_not(jpath):
    name = "DEMO — simulated cluster"
    _good(Journal(jpath, cluster=name), 2)  # written with \u2014, as json.dumps does
    with jpath.open("a", encoding="utf-8") as f:
        f.write(
            json.dumps({"node": "a", "started": 3.0, "command": "by hand", "cluster": name}, ensure_ascii=False) + "\n"
        )
        f.write(json.dumps({"node": "a", "started": 4.0, "command": "other", "cluster": "lab"}) + "\n")
    assert [e.command for e in read_journal(jpath, 10, cluster=name)] == ["echo 0", "echo 1", "by hand"]


def test_an_unreadable_journal_under_json_is_the_error_document(jpath, capsys):
    jpath.mkdir(parents=True)
    assert main(["journal", "--all", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"].startswith(str(jpath)) and doc["reason"] == "is a directory, not a journal file"
    assert doc["fix"].startswith("move it away")


def test_processes_appending_at_once_rotate_once_and_lose_no_line(jpath):
    import subprocess
    import sys

    jpath.parent.mkdir(parents=True)
    # 3 x 150 lines of some 130 bytes: one rotation at 40,000 bytes, which all three writers see coming
    code = (
        "import sys; from pathlib import Path; from sparktui.core.state.journal import Journal\n"
        "j = Journal(Path(sys.argv[1]), max_bytes=40000)\n"
        "for i in range(150): j.finish(j.start('n', f'{sys.argv[2]} {i}'), 0)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(jpath), w], env=env) for w in ("a", "b", "c")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    rotated = Path(str(jpath) + ".1")
    kept = [json.loads(ln)["command"] for f in (rotated, jpath) for ln in f.read_text().splitlines()]
    for w in ("a", "b", "c"):  # every line of every writer, once, in its order
        assert [int(c.split()[1]) for c in kept if c.startswith(w + " ")] == list(range(150)), w
    assert rotated.exists() and not Path(str(jpath) + ".2").exists()
