"""The demo story read off a real terminal (tmux) at 80x24 and 160x48, as a person reads it: notices
that leave the log and the dialogs alone, the demo's speed said, both URLs of the ready engine
labelled, the Ray worker's row serving, a journal entry whole on Enter.

The cluster is `sparktui demo up` (tests/tui/test_tmux.py starts it); keys in, screens out.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time

import pytest

from sparktui.tui.app import NARROW_COLS, NARROW_TIMEOUT

from ..tmuxterm import flat
from .test_tmux import _app, _start_demo

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def toasts(screen: str) -> str:
    """The notices' text: drawn right of a "▌" edge, wrapped; read as one string."""
    return " ".join(line.split("▌", 1)[1].strip() for line in screen.splitlines() if "▌" in line)


def _notices_stay_brief_and_low(tmux, until: str, limit: float = 90.0) -> None:
    """Until `until` shows: every notice spans the bottom rows (its "▌" edge in the first column, not
    halfway across the log) and none stays longer than NARROW_TIMEOUT (plus the polling's slack)."""
    first_seen: dict[str, float] = {}
    deadline = time.monotonic() + limit
    while True:
        screen, now = tmux.screen(), time.monotonic()
        assert all(line.find("▌") <= 0 for line in screen.splitlines()), screen
        for line in screen.splitlines():
            if line.startswith("▌") and line[1:].strip():
                seen = first_seen.setdefault(line, now)
                assert now - seen <= NARROW_TIMEOUT + 3, f"a notice stayed {now - seen:.0f} s:\n{screen}"
        if until in screen and first_seen:
            return
        assert now < deadline, f"{until!r} not on screen after {limit:g} s:\n{screen}"
        time.sleep(0.2)  # polling a terminal we do not own; bounded by the deadline above


@pytest.mark.parametrize("width,height", [(80, 24), (160, 48)])
def test_the_demo_story_reads_whole(tmp_path, width, height):
    narrow = width < NARROW_COLS
    # narrow: notices are watched from the hang to FAILED, a window the watchdog's 300 s sets (15 s at 20x:
    # more than a notice's life); wide waits only for each screen, so its engines may run faster
    speed, passes_in = (20, "15") if narrow else (40, "7.5")
    demo, info = _start_demo(speed=speed)
    tmux = _app(tmp_path, width, height, "--config", str(info["config"]))
    try:
        tmux.wait_for("model missing", 90)  # both nodes probed; the checkpoint is on spark1 only
        tmux.keys("t")
        tmux.wait_for(lambda s: "model copy to spark2" in toasts(s), 120, "the copy's notice")
        tmux.keys("l")  # at once, while the notice shows: the form must not sit under it
        form = tmux.wait_for("Launch (ctrl+s)", 30)
        assert "model copy to spark2" not in toasts(form), form
        tmux.wait_gone("model directory", 60)  # the probe after the copy clears the missing-model error
        tmux.keys("C-s")

        # the launch pane keeps the story, and the demo says why a "300 s" watchdog will fire seconds from now
        tmux.wait_for_all(
            "rendezvous hang",
            f"demo: engines {speed}× faster than real ones; their logs' 300 s pass in {passes_in} s here",
            timeout=120,
        )
        if narrow:
            _notices_stay_brief_and_low(tmux, until="FAILED")
        else:
            tmux.wait_for(lambda s: "Press p to pivot" in toasts(s), 30, "the hang notice")
        shown = toasts(tmux.screen())
        tmux.keys("?")
        help_screen = tmux.wait_for("Keys (", 10)
        if shown:  # what was raised before the help does not cover it
            assert shown[:40] not in toasts(help_screen), help_screen
        tmux.keys("Escape")
        tmux.wait_gone("Keys (")

        tmux.keys("p")
        tmux.wait_for("Pivot (y)", 60)
        tmux.keys("y")
        # the status line and the launch pane repaint on their own events: the frame that has both is the claim
        ready = tmux.wait_for(
            lambda s: (
                "● READY" in s
                and "Ray worker" in s
                and "SSH forward" in flat(s)
                and re.search(r"ready · on nodes http://\S+/v1", s.splitlines()[0])
            ),
            240,
            "vLLM ready, its URLs, the worker's row and the status line",
        )
        status = ready.splitlines()[0]
        assert re.search(r"ready · on nodes http://\S+/v1", status), status
        if not narrow:
            assert re.search(r" · local http://127\.0\.0\.1:\d+/v1", status), status
        assert re.search(r"local http://127\.0\.0\.1:\d+/v1 \(SSH forward from this machine\)", flat(ready)), ready
        worker = next(line for line in ready.splitlines() if line.lstrip().startswith("spark2 "))
        assert "ray up ›" in worker and "serving (Ray worker: its ranks log on spark1)" in flat(ready), ready

        tmux.keys("Tab")  # launch → journal
        tmux.wait_for("command (enter: the whole entry)", 10)
        tmux.keys("Enter")
        entry = tmux.wait_for("Journal entry (", 10)
        assert re.search(r"started\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", entry) and "command" in entry, entry
        tmux.keys("Escape")
        tmux.wait_gone("Journal entry (")
        tmux.keys("q")
        tmux.wait_exit(30)
    finally:
        tmux.close()
        demo.send_signal(signal.SIGINT)  # the demo's own Ctrl-C path stops its nodes and containers
        try:
            demo.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.communicate(timeout=10)
