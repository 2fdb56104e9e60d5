"""`sparktui demo --scenario pivot` in a real terminal (tmux): sync, SGLang hangs at the rendezvous,
the pivot is offered and taken with keys, vLLM comes up and answers a chat completion, and quitting
leaves nothing behind. Everything is driven by keys and read from the screen."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from ..tmuxterm import Tmux
from .conftest import require_namespaces, sparktui_argv
from .story import walk_seed_story

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

WIDTH, HEIGHT = 80, 24  # the smallest terminal the TUI supports


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    e = dict(os.environ, TMPDIR=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"), TERM="xterm-256color")
    e.pop("TMUX", None)
    return e


def test_pivot_story_with_keys(tmp_path, env):
    require_namespaces()
    cmd = (
        f"{shlex.join(sparktui_argv())} demo --scenario pivot --speed 20 --model-mb 2 "
        f"--link-mbps 100; echo DEMO-EXITED rc=$?; sleep 60"
    )
    tui = Tmux(cmd, WIDTH, HEIGHT, env, prefix="sparktui-demo-test")
    try:
        walk_seed_story(tui)
        tui.keys("q")
        tui.wait_for("DEMO-EXITED rc=0", 90)
    finally:
        tui.close()
    assert not list(Path(tmp_path).glob("sparktui-demo-*"))  # the demo's directory went with it
