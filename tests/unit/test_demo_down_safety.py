"""`demo down` signals only this user's own demos, proven by /proc, and never because of a file another user wrote."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time

import pytest

from sparktui.cli import main
from sparktui.demo import proc, registry
from sparktui.demo.cluster import PREFIX
from tests.unit import demofakes


class _Other:
    """Another, unprivileged user: root may give files any uid, with or without an account behind it."""

    pw_uid = pw_gid = 54321


def _alice() -> _Other:
    if os.geteuid() != 0:
        pytest.skip("needs root: the planted files must belong to another user")
    return _Other()


def _chown_tree(path, who: _Other) -> None:
    for dirpath, _, files in os.walk(path):
        os.chown(dirpath, who.pw_uid, who.pw_gid)
        for f in files:
            os.chown(os.path.join(dirpath, f), who.pw_uid, who.pw_gid)


def test_a_demo_json_planted_in_the_temp_directory_is_ignored(tmp_path, monkeypatch):
    alice = _alice()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    target = demofakes.demo_process(tmp_path)  # root's process, looking like a demo to /proc
    try:
        planted = tmp_path / f"{PREFIX}planted"
        planted.mkdir()
        (planted / "demo.json").write_text(
            json.dumps(
                {
                    "id": "planted",
                    "pid": target.pid,
                    "started": proc.start_time(target.pid),
                    "uid": 0,
                    "background": True,
                }
            )
        )
        _chown_tree(planted, alice)
        gone = subprocess.Popen(["true"])
        gone.wait()
        stale = tmp_path / f"{PREFIX}stale"  # alice's, its process gone: still not root's to remove
        stale.mkdir()
        (stale / "demo.json").write_text(json.dumps({"pid": gone.pid, "started": 0, "uid": 0}))
        _chown_tree(stale, alice)
        assert main(["demo", "down"]) == 1
        assert main(["demo", "down", "planted"]) == 1
        assert target.poll() is None
        assert (planted / "demo.json").exists() and (stale / "demo.json").exists()
    finally:
        demofakes.end(target)


def test_registry_files_of_another_owner_or_writable_by_others_are_ignored(tmp_path, monkeypatch):
    alice = _alice()
    target = demofakes.demo_process(tmp_path)
    try:
        d = registry.directory()
        d.mkdir(parents=True, mode=0o700)
        planted = demofakes.entry("planted", target.pid, tmp_path / f"{PREFIX}planted")
        registry.add(planted)
        os.chown(d / "planted.json", alice.pw_uid, alice.pw_gid)  # a file in root's registry, alice's own
        loose = demofakes.entry("loose", target.pid, tmp_path / f"{PREFIX}loose")
        (d / "loose.json").write_text(json.dumps(loose.__dict__))
        os.chmod(d / "loose.json", 0o666)  # root's, but anyone could have written it
        assert main(["demo", "down"]) == 1 and main(["demo", "down", "planted"]) == 1
        assert main(["demo", "down", "loose"]) == 1
        # a whole registry directory of alice's (a HOME that points into hers): none of it counts
        other = tmp_path / "alice-state"
        monkeypatch.setenv("XDG_STATE_HOME", str(other))
        registry.add(demofakes.entry("hers", target.pid, tmp_path / f"{PREFIX}hers"))
        _chown_tree(other, alice)
        assert main(["demo", "down"]) == 1 and main(["demo", "down", "hers"]) == 1
        assert target.poll() is None
    finally:
        demofakes.end(target)


def test_an_empty_or_unknown_id_stops_nothing(tmp_path, capsys):
    bg = demofakes.registered(tmp_path, "bg1")
    try:
        assert main(["demo", "down", ""]) == 1
        assert "no demo has the id ''" in capsys.readouterr().err
        assert main(["demo", "down", "", "--json"]) == 1
        assert json.loads(capsys.readouterr().out)["stopped"] == []
        assert main(["demo", "down", "nosuch"]) == 1 and main(["demo", "down", "../bg1"]) == 1
        assert bg.poll() is None
    finally:
        demofakes.end(bg)


def test_demo_down_reaches_only_demos_of_this_state_directory(tmp_path, monkeypatch):
    bg = demofakes.registered(tmp_path, "elsewhere")
    try:
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "another-home-state"))
        assert main(["demo", "down"]) == 1 and main(["demo", "down", "elsewhere"]) == 1
        assert bg.poll() is None
    finally:
        demofakes.end(bg)


def test_a_pid_reused_by_a_process_that_is_no_demo_is_not_signalled(tmp_path):
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        # the same pid and even the same start time, as if reused at once: the command line gives it away
        registry.add(demofakes.entry("reused", sleeper.pid, tmp_path / f"{PREFIX}reused"))
        stale = demofakes.entry("stale", sleeper.pid, tmp_path / f"{PREFIX}stale")
        stale.start_ticks -= 1000  # the demo that wrote it started earlier
        registry.add(stale)
        assert main(["demo", "down"]) == 1 and main(["demo", "down", "reused"]) == 1
        assert main(["demo", "down", "stale"]) == 1
        assert sleeper.poll() is None
        assert not proc.terminate(sleeper.pid, proc.start_ticks(sleeper.pid))
        assert sleeper.poll() is None
    finally:
        demofakes.end(sleeper)


def test_a_demo_killed_with_9_leaves_a_directory_the_next_demo_down_removes(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = demofakes.registered(tmp_path, "dead1")
    live = demofakes.registered(tmp_path, "live1", background=False)
    # one known only from its directory (its registry elsewhere), and one kept on purpose
    orphan, kept = demofakes.demo_process(tmp_path), demofakes.demo_process(tmp_path)
    older = tmp_path / f"{PREFIX}older1"  # an older sparktui's demo.json: it never said whether it was kept
    older.mkdir(mode=0o700)
    (older / "demo.json").write_text(json.dumps({"pid": kept.pid, "started": time.time(), "uid": os.getuid()}))
    for name, p, keep in (("orphan1", orphan, False), ("kept1", kept, True)):
        (tmp_path / f"{PREFIX}{name}").mkdir(mode=0o700)
        (tmp_path / f"{PREFIX}{name}" / "demo.json").write_text(
            json.dumps(
                {
                    "pid": p.pid,
                    "start_ticks": proc.start_ticks(p.pid),
                    "boot_id": proc.boot_id(),
                    "started": time.time(),
                    "keep": keep,
                }
            )
        )
    try:
        for p in (dead, orphan, kept):
            p.kill()
            p.wait()
            demofakes.wait_dead(p.pid)
        assert main(["demo", "down"]) == 1  # no background demo runs, yet it cleans up
        assert not (tmp_path / f"{PREFIX}dead1").exists() and not (tmp_path / f"{PREFIX}orphan1").exists()
        assert not (registry.directory() / "dead1.json").exists()
        assert (tmp_path / f"{PREFIX}live1" / "client").is_dir() and live.poll() is None
        assert (tmp_path / f"{PREFIX}kept1").is_dir() and older.is_dir()
    finally:
        demofakes.end(dead, live, orphan, kept)
