"""`sparktui demo --scenario pivot` in a real terminal (tmux): sync, SGLang hangs at the rendezvous,
the pivot is offered and taken with keys, vLLM comes up and answers a chat completion, and quitting
leaves nothing behind. Everything is driven by keys and read from the screen."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from .conftest import require_namespaces, sparktui_argv

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

WIDTH, HEIGHT = 80, 24  # the smallest terminal the TUI supports


class Tmux:
    """One tmux server of our own (-L unique name): started here, killed here, nobody else's touched."""

    def __init__(self, command: str, env: dict[str, str]):
        self.socket = f"sparktui-demo-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.env = env
        self._tmux("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), command)

    def _tmux(self, *args: str) -> str:
        r = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, env=self.env,
                           timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {r.stderr.strip()}")
        return r.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def wait_for(self, predicate, timeout: float, what: str) -> str:
        """Poll the screen until predicate(text) holds, at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; screen:\n{text}")

    def wait_text(self, needle: str, timeout: float) -> str:
        return self.wait_for(lambda s: needle in s, timeout, repr(needle))

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


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
    tui = Tmux(cmd, env)
    try:
        # the status line shortens its words to keep the endpoint at 80 columns: "2/2 nodes up" or "2/2 up"
        tui.wait_for(lambda s: "DEMO — simulated cluster" in s and re.search(r"2/2 (nodes )?up", s)
                     and "model missing" in s,
                     120, "both nodes up, the model only on spark1")
        tui.keys("t")
        tui.wait_text("verified:", 60)
        tui.keys("C-r", "BTab")  # probe again, back to the nodes pane
        tui.wait_for(lambda s: "model missing" not in s and s.count("model 2.0 MiB") == 2, 60,
                     "the model on both nodes")
        tui.keys("l")
        form = tui.wait_text("Launch demo-moe-30b-a3b", 30)
        assert "SGLang" in form and "✗" not in form
        tui.keys("C-s")
        # notifications are drawn right of a "▌" edge and wrap: read their text as one string
        hung = tui.wait_for(lambda s: "Press p to pivot" in toasts(s), 120, "the hang notification offering p")
        assert "hang" in toasts(hung).lower()
        tui.keys("p")
        confirm = tui.wait_text("Pivot (y)", 60)  # the confirmation names what stops and starts where
        assert "to vllm (ray), TP 2" in confirm
        tui.keys("y")
        ready = tui.wait_for(lambda s: "● READY" in s and "answered in" in s, 240,
                             "vLLM ready and a chat completion answered")
        assert "ray up" in ready
        tui.keys("q")
        tui.wait_text("DEMO-EXITED rc=0", 90)
    finally:
        tui.kill()
    assert not list(Path(tmp_path).glob("sparktui-demo-*"))  # the demo's directory went with it
