"""Parallel rsync streams: how files are split, the job script, one progress from many, the cipher order."""

from __future__ import annotations

import subprocess

from sparktui.core.transfers import cipher, streams
from sparktui.core.transfers.remote import RS
from sparktui.core.transfers.state import parse_poll
from sparktui.demo import link

MB = 1 << 20


def test_large_files_the_destination_lacks_are_spread_largest_first():
    src = {"a": 40 * MB, "b": 30 * MB, "c": 20 * MB, "d": 20 * MB, "config.json": 500}
    p = streams.plan(src, {}, 3)
    assert p.count == 3 and p.lists[0] == []  # stream 0 takes whatever no list names
    given = [n for lst in p.lists[1:] for n in lst]
    assert sorted(given + ["config.json"] + [n for n in src if n not in given and n != "config.json"]) == sorted(src)
    assert max(p.bytes) - min(p.bytes) <= 20 * MB  # balanced by bytes
    assert sum(p.bytes) == sum(src.values())
    assert all(p.whole_file)  # nothing on the destination to diff against


def test_files_on_the_destination_and_odd_names_stay_with_stream_zero():
    src = {"part": 40 * MB, "done": 40 * MB, "new": 40 * MB, "we*ird": 40 * MB, "#x": 40 * MB, "sub/ sp": 40 * MB}
    dst = {"part": 3 * MB, "done": 40 * MB}
    p = streams.plan(src, dst, 8)
    given = {n for lst in p.lists[1:] for n in lst}
    assert given == {"new"}  # the partial one resumes by delta in stream 0; filters could misread the others
    assert p.whole_file == [False, True]  # stream 0 has a partial file to diff against


def test_one_stream_is_todays_single_rsync():
    p = streams.plan({"a": 100 * MB, "b": 100 * MB}, None, 1)
    assert p.count == 1 and streams.state_files(p) == {}
    job = streams.job(p, "~/models/m", "u", "10.0.0.2", "~/models/m", ["ssh", "-o", "BatchMode=yes"])
    assert job.startswith("LC_ALL=C rsync -a ") and "--whole-file" in job and "--files-from" not in job
    assert job.endswith('"$HOME"/models/m/ u@10.0.0.2:models/m/')  # ~/ is the login's home on both sides


def test_stream_count_follows_cores_large_files_and_the_bound():
    assert streams.stream_count(20, 30, 8) == 8
    assert streams.stream_count(20, 3, 8) == 3
    assert streams.stream_count(6, 30, 8) == 3
    assert streams.stream_count(2, 30, 8) == 1
    assert streams.stream_count(None, 30, 8) == 1


def test_the_job_lists_and_excludes_each_streams_files(tmp_path):
    p = streams.plan({"s/a": 40 * MB, "s/b": 30 * MB, "c": 20 * MB}, {}, 3)
    files = streams.state_files(p)
    assert sorted(files["files.0"].splitlines()) == sorted(f"/{n}" for lst in p.lists[1:] for n in lst)
    for i in range(1, p.count):
        assert files[f"files.{i}"].splitlines() == p.lists[i]
    job = streams.job(p, "/m", "u", "h", "/m", ["ssh"], bwlimit="90m")
    assert subprocess.run(["sh", "-n"], input=job, text=True).returncode == 0
    assert job.count("--bwlimit=30.000m") == 3  # the copy's limit shared by its streams
    assert "--exclude-from=files.0" in job and "--files-from=files.2" in job


def test_a_failing_stream_fails_the_job_and_is_named(tmp_path):
    """The job's own logic with a stand-in rsync: stream 2 fails for good, stream 1 once then not."""
    fake = tmp_path / "rsync"
    fake.write_text(
        "#!/bin/sh\ncase \"$*\" in *files.2*) echo 'rsync: write failed: No space left on device' >&2; "
        "exit 11;; *files.1*) [ -e once ] && exit 0; : > once; exit 12;; esac\nexit 0\n"
    )
    fake.chmod(0o755)
    p = streams.plan({"a": 40 * MB, "b": 30 * MB, "c": 20 * MB}, {}, 3)
    for name, text in streams.state_files(p).items():
        (tmp_path / name).write_text(text)
    job = streams.job(p, "/m", "u", "h", "/m", ["ssh"]).replace("sleep 1;", "")
    r = subprocess.run(
        ["sh", "-c", job], cwd=tmp_path, env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert r.returncode == 11
    assert "stream 2 (1 files" in r.stdout and "stream 2: rsync: write failed: No space left on device" in r.stdout
    assert "stream 1 (" not in r.stdout  # retried after its broken connection, then fine
    assert "rsync exit 12, starting it again (1 of 2)" in (tmp_path / "log.1").read_text()


def test_a_poll_brings_every_streams_progress_and_they_add_up():
    s1 = f"{RS}    10,000,000  50%   5.00MB/s    0:00:02  "
    s2 = f"{RS}    20,000,000 100%  10.00MB/s    0:00:02 (xfr#1, to-chk=0/1){RS}"
    out = f"rc= alive=1 size=60 count= now=5 cancelled=0 n=0 streams=2 s0=\n1 - {s1}\n2 0 {s2}\n"
    poll = parse_poll(out)
    assert [(s.index, s.rc, s.update.bytes) for s in poll.streams] == [(1, None, 10_000_000), (2, 0, 20_000_000)]
    main = streams.parse_stream_line(f"0 - {RS}   5,000,000  25%   4.00MB/s    0:00:03  ").update
    u = streams.combine(main, poll.streams, 40_000_000)
    assert u.bytes == 35_000_000 and u.percent == 87
    assert u.rate == 9 * MB  # the finished stream no longer counts towards the rate (rsync's MB is MiB)
    assert u.eta == 5_000_000 / (9 * MB)
    rows = streams.stream_rows(main, poll.streams, False)
    assert [(r["n"], r["done"]) for r in rows] == [(0, False), (1, False), (2, True)]


def test_cipher_order_follows_the_cpu_and_what_the_client_knows():
    both = {"aes128-gcm@openssh.com", "chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr"}
    assert cipher.preference(True, both)[0] == "aes128-gcm@openssh.com"
    assert cipher.preference(False, both)[0] == "chacha20-poly1305@openssh.com"
    assert cipher.preference(True, {"chacha20-poly1305@openssh.com"}) == ["chacha20-poly1305@openssh.com"]
    assert cipher.user_set("ssh -c aes256-ctr") and cipher.user_set("ssh -o Ciphers=aes256-ctr")
    assert not cipher.user_set("ssh -o BatchMode=yes")


def test_the_demo_link_holds_a_stream_to_its_ceiling_and_shares_the_rest():
    assert link.share_of(100.0, 2) == 50.0
    assert link.share_of(100.0, 2, 20.0) == 20.0  # one stream's cores, not the link, hold it
    assert link.share_of(100.0, 8, 20.0) == 12.5  # eight streams fill the link
