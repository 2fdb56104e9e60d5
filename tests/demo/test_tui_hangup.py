"""`sparktui demo` in a real terminal (tmux) that is closed under it, as when the laptop's SSH session
drops: the app ends, its simulated nodes stop and the demo's directory goes, with nobody at the keys."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest

from ..tmuxterm import Tmux
from .conftest import require_namespaces, sparktui_argv

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)  # polling a process that is not our child; bounded by the deadline
    return True


def test_a_closed_terminal_ends_the_demo_and_stops_its_nodes(tmp_path):
    require_namespaces()
    env = dict(os.environ, TMPDIR=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"), TERM="xterm-256color")
    env.pop("TMUX", None)
    # exec: the pane's process is the app itself, so the hang-up reaches it as it would from a closed window
    cmd = f"exec {shlex.join(sparktui_argv())} demo --scenario happy --speed 60 --model-mb 2 --link-mbps 100"
    tui = Tmux(cmd, 100, 30, env, prefix="sparktui-demo-test")
    try:
        tui.wait_for(
            lambda s: "DEMO — simulated cluster" in s and re.search(r"2/2 (nodes )?up", s), 120, "both nodes up"
        )
        pid = int(tui("list-panes", "-t", "app", "-F", "#{pane_pid}").split()[0])
        assert list(Path(tmp_path).glob("sparktui-demo-*"))  # the demo's nodes live there while it runs
    finally:
        tui.close()  # the terminal goes: the app gets SIGHUP and its writes fail from here on
    assert gone(pid, 60), f"the demo (pid {pid}) outlived its terminal"
    assert not list(Path(tmp_path).glob("sparktui-demo-*"))  # its nodes stopped and their directory went
