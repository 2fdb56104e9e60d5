"""`sparktui demo --scenario unsupported` in a real terminal (tmux): the stock SGLang image cannot load the
Qwen3.5 model, so `t` says so and asks before anything is copied; n copies nothing, y copies anyway."""

from __future__ import annotations

import os
import re
import shlex
import shutil

import pytest

from ..tmuxterm import Tmux
from .conftest import require_namespaces, sparktui_argv

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def test_t_asks_before_copying_a_model_the_image_cannot_load(tmp_path):
    require_namespaces()
    env = dict(os.environ, TMPDIR=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"), TERM="xterm-256color")
    env.pop("TMUX", None)
    cmd = (
        f"{shlex.join(sparktui_argv())} demo --scenario unsupported --speed 20 --model-mb 2 "
        f"--link-mbps 100; echo DEMO-EXITED rc=$?; sleep 60"
    )
    tui = Tmux(cmd, 100, 30, env, prefix="sparktui-demo-test")
    try:
        tui.wait_for(
            lambda s: re.search(r"2/2 (nodes )?up", s) and "model missing" in s,
            120,
            "both nodes up, the model only on spark1",
        )
        tui.keys("t")
        asked = tui.wait_for_all("Copy anyway (y)", "cannot load", timeout=240)
        assert "qwen3_5_moe" in asked and "verified:" not in asked
        tui.keys("n")
        tui.wait_for(lambda s: "Copy anyway (y)" not in s, 30, "the question gone")
        tui.keys("t")
        tui.wait_for("Copy anyway (y)", 120)
        tui.keys("y")
        tui.wait_for("verified:", 60)
        tui.keys("q")
        tui.wait_for("DEMO-EXITED rc=0", 90)
    finally:
        tui.close()
