"""`sparktui demo --scenario pivot` in a real terminal (tmux): sync, SGLang hangs at the rendezvous,
the pivot is offered and taken with keys, vLLM comes up and answers a chat completion, and quitting
leaves nothing behind. Everything is driven by keys and read from the screen."""
from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from ..tmuxterm import Tmux
from .conftest import require_namespaces, sparktui_argv

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

WIDTH, HEIGHT = 80, 24  # the smallest terminal the TUI supports


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    e = dict(os.environ, TMPDIR=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"), TERM="xterm-256color")
    e.pop("TMUX", None)
    return e


def toasts(screen: str) -> str:
    return " ".join(line.split("▌", 1)[1].strip() for line in screen.splitlines() if "▌" in line)


def test_pivot_story_with_keys(tmp_path, env):
    require_namespaces()
    cmd = (f"{shlex.join(sparktui_argv())} demo --scenario pivot --speed 20 --model-mb 2 "
           f"--link-mbps 100; echo DEMO-EXITED rc=$?; sleep 60")
    tui = Tmux(cmd, WIDTH, HEIGHT, env, prefix="sparktui-demo-test")
    try:
        # the status line shortens its words to keep the endpoint at 80 columns: "2/2 nodes up" or "2/2 up"
        tui.wait_for(lambda s: "DEMO — simulated cluster" in s and re.search(r"2/2 (nodes )?up", s)
                     and "model missing" in s,
                     120, "both nodes up, the model only on spark1")
        tui.keys("t")
        tui.wait_for("verified:", 60)
        tui.keys("C-r", "BTab")  # probe again, back to the nodes pane
        tui.wait_for(lambda s: "model missing" not in s and s.count("model 2.0 MiB") == 2, 60,
                     "the model on both nodes")
        tui.keys("l")
        form = tui.wait_for_all("Launch demo-moe-30b-a3b", "SGLang", timeout=30)
        assert "✗" not in form
        tui.keys("C-s")
        # the form goes, or says why it cannot launch (a toast gone in seconds: caught here, not later)
        left = tui.wait_for(lambda s: "Launch demo-moe-30b-a3b on spark1" not in s or "cannot launch" in toasts(s), 30,
                            "the form gone or its refusal")
        assert "cannot launch" not in toasts(left), left
        # notifications are drawn right of a "▌" edge and wrap: read their text as one string
        tui.wait_for(lambda s: "Press p to pivot" in toasts(s) and "hang" in toasts(s).lower(), 120,
                     "the hang notification offering p")
        tui.keys("p")
        tui.wait_for_all("Pivot (y)", "to vllm (ray), TP 2", timeout=60)  # what stops and starts where
        tui.keys("y")
        tui.wait_for(lambda s: "● READY" in s and "answered in" in s and "ray up" in s, 240,
                     "vLLM ready over Ray and a chat completion answered")
        tui.keys("q")
        tui.wait_for("DEMO-EXITED rc=0", 90)
    finally:
        tui.close()
    assert not list(Path(tmp_path).glob("sparktui-demo-*"))  # the demo's directory went with it
