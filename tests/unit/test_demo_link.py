"""The demo's shared link: streams leaving one node split its rate; a transfer's end is read at once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from sparktui.core.transfers import remote
from sparktui.core.transfers.state import parse_poll
from sparktui.demo import link


def test_leases_count_the_live_streams_of_a_node_and_forget_dead_ones(tmp_path):
    mine = link.Lease(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    (tmp_path / str(other.pid)).touch()
    try:
        assert mine.sharers() == 2
    finally:
        other.stdin.close()
        other.wait()
    assert mine.sharers() == 1 and not (tmp_path / str(other.pid)).exists()
    mine.close()
    assert not mine.path.exists()


def test_a_stream_sharing_the_link_gets_half_of_it(tmp_path):
    rate = 1 << 20  # 1 MiB/s for the node
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    (tmp_path / str(other.pid)).touch()  # a second copy leaves the node meanwhile
    r, w = os.pipe()
    out_r, out_w = os.pipe()
    payload = b"x" * (512 * 1024)

    def feed() -> None:
        os.write(w, payload)
        os.close(w)

    def drain() -> None:
        while os.read(out_r, 1 << 16):
            pass

    threading.Thread(target=feed).start()
    reader = threading.Thread(target=drain)
    reader.start()
    try:
        t0 = time.monotonic()
        assert link.pump(r, out_w, rate, tmp_path) == len(payload)
        took = time.monotonic() - t0
    finally:
        os.close(out_w)
        reader.join()
        os.close(r)
        os.close(out_r)
        other.stdin.close()
        other.wait()
    assert took >= len(payload) / (rate / 2) - link.BURST  # half the link: at least ~0.75 s, not 0.5


def test_a_read_that_waits_for_news_returns_as_soon_as_the_transfer_ends(tmp_path):
    home = tmp_path / "home"
    d = home / remote.STATE_ROOT / "model-n2-1"
    d.mkdir(parents=True)
    (d / "log").write_text("started\n")
    job = subprocess.Popen(["sleep", "60"])
    (d / "pid").write_text(str(job.pid))
    env = {**os.environ, "HOME": str(home)}
    try:
        t0 = time.monotonic()
        quiet = subprocess.run(
            ["sh", "-c", remote.read_state("model-n2-1", len("started\n"), wait=1.0)],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert time.monotonic() - t0 >= 0.9 and parse_poll(quiet.stdout).rc is None  # nothing new: it waited
        reader = subprocess.Popen(
            ["sh", "-c", remote.read_state("model-n2-1", len("started\n"), wait=30.0)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        t0 = time.monotonic()
        (d / "rc").write_text("0\n")  # the copy ends while the node waits for news
        out, _ = reader.communicate(timeout=30)
        assert time.monotonic() - t0 < 10  # seen at once, not after the 30 s wait
    finally:
        job.kill()
        job.wait()
    assert parse_poll(out).rc == 0
