"""run_app: SIGTERM or SIGHUP (`kill`, a closed terminal) ends the app the normal way, and an app whose
normal way is stuck (Textual's output thread dead on a hung-up terminal) is still ended, after what it
started is stopped. Each case runs in a process of its own: the signal and the forced exit are real."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys, threading
    from sparktui.cli import tui

    tui.EXIT_GRACE_S = 0.3

    class App:
        close_timeout = 5.0

        def __init__(self, stuck):
            self.stuck, self.done = stuck, threading.Event()

        def exit(self):
            if not self.stuck:  # stuck: the exit is asked for and never comes (the output queue is full)
                self.done.set()

        def run(self):
            print("running", flush=True)
            self.done.wait()
            return "ended"

    def stop_nodes():
        open(sys.argv[2], "w").write("stopped")

    print(tui.run_app(App(sys.argv[1] == "stuck"), on_forced_exit=stop_nodes), flush=True)
""")


def run_until_signalled(tmp_path: Path, how: str, sig: int) -> tuple[int, str, Path]:
    marker = tmp_path / "stopped"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, how, str(marker)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "running", proc.stderr.read()  # inside app.run()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out + err, marker


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_signal_ends_the_app_the_normal_way(tmp_path, sig):
    rc, out, marker = run_until_signalled(tmp_path, "normal", sig)
    assert (rc, out.strip()) == (0, "ended")
    assert not marker.exists()  # the app stopped what it started itself: nothing forced


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_an_app_stuck_on_its_way_out_is_ended_after_what_it_started_is_stopped(tmp_path, sig):
    rc, out, marker = run_until_signalled(tmp_path, "stuck", sig)
    assert rc == 128 + sig, out  # as the signal itself would have ended it
    assert marker.read_text() == "stopped"
    assert "ended" not in out
