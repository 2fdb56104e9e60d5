"""The remote snippets run by a local POSIX shell (dash, busybox sh): state directory life cycle,
log reads from an offset, listing, cancel, pruning, inventory. No SSH: just the shell side."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from sparktui.core.transfers import remote
from sparktui.core.transfers.model_sync import parse_file_list
from sparktui.core.transfers.state import parse_listing, parse_poll

SHELLS = [s for s in (["dash"], ["busybox", "sh"]) if shutil.which(s[0])]
pytestmark = pytest.mark.skipif(not SHELLS, reason="needs dash or busybox")


@pytest.fixture(params=SHELLS, ids=lambda s: s[0])
def run(request, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    shell = request.param

    def run(script: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(
            [*shell, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            env={"HOME": str(home), "PATH": os.environ["PATH"]},
            cwd=home,
        )
        if check:
            assert r.returncode == 0, r.stderr
        return r

    run.home = home
    yield run
    subprocess.run(
        [
            "sh",
            "-c",
            f"for p in {home}/.local/state/sparktui/transfers/*/pid; do "
            '[ -f "$p" ] && kill -KILL -"$(cat "$p")" 2>/dev/null; done; true',
        ],
        check=False,
    )


def wait_file(path: Path, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


def test_detached_job_logs_progress_and_leaves_its_exit_status(run):
    job = r"printf '\r  1,024  10%%  1.00kB/s  0:00:09  '; printf 'oops\n' >&2; exit 23"
    pid = int(run(remote.start_detached("t-1", {"id": "t-1", "kind": "model"}, job)).stdout)
    d = run.home / ".local/state/sparktui/transfers/t-1"
    wait_file(d / "rc")
    assert (d / "rc").read_text().strip() == "23" and int((d / "pid").read_text()) == pid
    first = parse_poll(run(remote.read_state("t-1", 0, limit=5)).stdout)
    assert (first.rc, first.alive, first.nbytes) == (23, False, 5) and first.size > 5
    rest = parse_poll(run(remote.read_state("t-1", 5)).stdout)
    assert first.data + rest.data == (d / "log").read_text()  # offsets join without loss or overlap
    assert json.loads((d / "meta.json").read_text()) == {"id": "t-1", "kind": "model"}
    again = run(remote.start_detached("t-1", {}, "true"), check=False)
    assert again.returncode == 17  # an id is never reused


def test_cancel_stops_the_whole_group_and_marks_it(run):
    run(
        remote.start_detached(
            "t-2",
            {"id": "t-2", "kind": "model", "source": "a", "dest": "b", "addr": "x", "user": "u"},
            "sleep 60 & sleep 60; wait",
        )
    )
    d = run.home / ".local/state/sparktui/transfers/t-2"
    wait_file(d / "pid")
    assert "alive=1" in run(remote.read_state("t-2", 0)).stdout
    assert run(remote.cancel("t-2")).stdout.strip() == "stopped"
    [rec] = parse_listing(run(remote.list_states()).stdout)
    assert rec.state == "cancelled" and not rec.alive
    pgid = (d / "pid").read_text().strip()
    left = subprocess.run(["ps", "-o", "stat=", "-g", pgid], capture_output=True, text=True).stdout.split()
    assert all(s.startswith("Z") for s in left)  # nothing of the group runs (zombies may wait for a reaper)


def test_cancel_after_the_end_changes_nothing(run):
    run(remote.start_detached("t-3", {"id": "t-3"}, "true"))
    wait_file(run.home / ".local/state/sparktui/transfers/t-3/rc")
    assert run(remote.cancel("t-3")).stdout.strip() == "finished"
    assert not (run.home / ".local/state/sparktui/transfers/t-3/cancelled").exists()


def test_listing_keeps_the_log_tail_on_one_record(run):
    meta = {"id": "t-4", "kind": "model", "source": "a", "dest": "b", "addr": "x", "user": "u", "path": "/m"}
    job = r"printf '\r  5,000  50%%  1.00kB/s  0:00:05 (xfr#1, to-chk=1/2)\rrsync: oops\n'; exit 11"
    run(remote.start_detached("t-4", meta, job))
    wait_file(run.home / ".local/state/sparktui/transfers/t-4/rc")
    [rec] = parse_listing(run(remote.list_states()).stdout)
    assert rec.state == "failed" and rec.to_dict()["bytes"] == 5000
    assert "rsync exit 11" in rec.message() and "rsync: oops" in rec.message()


def test_a_new_transfer_prunes_long_ended_ones_only(run):
    for tid, job in (("old-done", "true"), ("old-running", "sleep 60")):
        run(remote.start_detached(tid, {"id": tid}, job))
    root = run.home / ".local/state/sparktui/transfers"
    wait_file(root / "old-done/rc")
    wait_file(root / "old-running/pid")
    old = time.time() - 30 * 86400
    for f in root.glob("*/*"):
        os.utime(f, (old, old))
    run(remote.start_detached("new", {"id": "new"}, "true"))
    assert sorted(p.name for p in root.iterdir()) == ["new", "old-running"]


def test_file_list_sizes_odd_names_and_reads_the_incomplete_mark(run):
    d = run.home / "models" / "m"
    (d / "sub").mkdir(parents=True)
    (d / "a b").write_bytes(b"x" * 1000)
    (d / "sub" / "new\nline").write_bytes(b"y" * 24)
    (d / "link").symlink_to("a b")
    (d / remote.MARKER).write_text("copy x from a\nsecond line\n")
    inv = parse_file_list(run(remote.file_list("~/models/m")).stdout)
    # a link counts as the file it points to (a model's shards may be links into a cache)
    assert inv == {
        "files": 3,
        "links": 1,
        "bytes": 2024,
        "sizes": {"a b": 1000, "link": 1000, "sub/new\nline": 24},
        "incomplete": "copy x from a",
    }
    (d / "dangling").symlink_to("gone")
    assert "dangling" not in parse_file_list(run(remote.file_list("~/models/m")).stdout)["sizes"]
    (d / remote.MARKER).unlink()
    assert parse_file_list(run(remote.file_list("~/models/m")).stdout)["incomplete"] is None
    assert run(remote.file_list("~/models/missing"), check=False).returncode == 3
    free = dict(w.split("=", 1) for w in run(remote.free_space("~/models/not/yet")).stdout.split())
    assert int(free["avail"]) > 0 and free["at"] == str(run.home / "models")
