"""The real app in a real terminal (tmux): start, open the launch form, switch engine, launch, quit.

The nodes are in-process SSH servers started by tests/tui/sshnodes.py in a child process; tmux runs
on its own socket (-L) so nothing else on the machine is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from ..tmuxterm import Tmux, app_command, footer

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _app(tmp_path: Path, width: int, height: int, *argv: str, tail: str = "", **extra: str) -> Tmux:
    """sparktui with argv in a width x height terminal, its config and state under tmp_path."""
    env = {
        "PYTHONPATH": str(REPO),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TERM": "xterm-256color",
        **extra,
    }
    return Tmux(app_command(env, sys.executable, "-m", "sparktui", *argv) + tail, width, height)


@contextlib.contextmanager
def running_nodes(root: Path) -> Iterator[Path]:
    """Two in-process SSH nodes (tests/tui/sshnodes.py) in a child process; yields their config."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.tui.sshnodes", str(root), "2"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("READY "):
            raise AssertionError(f"the node servers did not start: {line!r}")
        yield Path(line.split(" ", 1)[1].strip())
    finally:
        proc.stdin.close()  # the servers stop when their stdin closes
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_form_in_a_real_terminal(tmp_path):
    with running_nodes(tmp_path / "nodes") as config:
        tmux = _app(tmp_path, 100, 32, "--config", str(config))
        try:
            tmux.wait_for("2/2 nodes up")
            tmux.wait_for("◆ fabric")
            tmux.keys("l")
            screen = tmux.wait_for_all(
                "Launch m on spark1, spark2", "TP 2 × PP 1", "auto: the fabric", "192.168.100.10"
            )
            assert "✗" not in screen, screen  # warnings (no /dev/infiniband here) but no errors
            # the engine select has the focus: open it, move to vLLM (Ray), choose it
            tmux.keys("Enter")
            tmux.wait_for("vLLM (native)")
            tmux.keys("Down")
            tmux.keys("Enter")
            tmux.wait_for_all("Ray port", "8000")  # the HTTP port follows the engine
            tmux.keys("C-s")
            # the preflight runs first, a row per node; these nodes have no docker, so it fails and the
            # launch is refused unless told to go anyway
            tmux.wait_for_all("anyway (y)", "preflight", "spark1", timeout=60)
            tmux.keys("n")
            tmux.wait_for_all("REFUSED", "Launch  Journal")
            tmux.wait_gone("anyway (y)")  # a person sees the dialog go before pressing q (it takes no q)
            tmux.keys("q")
            tmux.wait_exit(20)
        finally:
            tmux.close()


def _start_demo(speed: int, model_mb: int = 16) -> tuple[subprocess.Popen, dict]:
    """`sparktui demo up` with engines `speed` times faster than real ones and a checkpoint of `model_mb`
    (the default 64 MB takes seconds to copy at the demo's link pace; the stories need a copy, not its length)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparktui", "demo", "up", "--json", "--speed", str(speed), "--model-mb", str(model_mb)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
    )
    ready, _, _ = select.select([proc.stdout], [], [], 90)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("{"):
        proc.terminate()
        err = proc.communicate(timeout=30)[1]
        if "namespace" in err.lower():
            pytest.skip(f"the demo needs unprivileged user namespaces: {err.strip()[-300:]}")
        raise AssertionError(f"sparktui demo up did not start: {line!r} {err[-2000:]}")
    return proc, json.loads(line)


def test_demo_story_in_a_real_terminal(tmp_path):
    """sync the model, launch SGLang from the form, see the hang, pivot to vLLM with Ray, reach READY."""
    demo, info = _start_demo(speed=20)
    tmux = _app(tmp_path, 110, 34, "--config", str(info["config"]))
    try:
        tmux.wait_for("2/2 nodes up", 60)
        tmux.wait_for("model missing", 60)  # the checkpoint is on spark1 only
        tmux.keys("t")
        tmux.wait_for("verified:", 120)
        tmux.keys("l")
        screen = tmux.wait_for("Launch ", 30)
        tmux.wait_for("Launch (ctrl+s)", 30)
        tmux.wait_gone("model directory", 60)  # the inventory after the copy clears the missing-model error
        screen = tmux.screen()
        assert "✗" not in screen, screen
        tmux.keys("C-s")
        tmux.wait_for("HUNG", 120)
        screen = tmux.wait_for("rendezvous hang", 30)
        tmux.keys("p")
        tmux.wait_for_all("stop  sparktui-", "start sparktui-", "Pivot (y)", timeout=60)  # node by node
        tmux.keys("y")
        tmux.wait_for(lambda s: "READY" in s and ("ray joined" in s or "ray up" in s), 180, "READY with Ray up")
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


def test_80x24_footer_keys_and_an_early_key(tmp_path):
    """At 80x24 every essential key is in the footer; t pressed the moment the nodes are up acts or says why."""
    with running_nodes(tmp_path / "nodes") as config:
        tmux = _app(tmp_path, 80, 24, "--config", str(config))
        try:
            tmux.wait_for("2/2 nodes up")
            tmux.keys("t")  # at once: the first probe may still be on its way
            tmux.wait_for("Sync model", 30)  # the transfer pane's row or a word about the wait
            keys = ("l Launch", "p Pivot", "s Stop", "t Sync", "b Bench", "f Follow", "? Keys", "^p Palette", "q Quit")
            # at 80 columns "b Bench" leaves no room for "/ Filter": / stays in the help and the palette
            # the footer is redrawn when the pane changes its bindings: wait for the whole of it
            screen = tmux.wait_for(
                lambda s: all(k in footer(s) for k in keys), 10, f"every key of {keys} in the footer"
            )
            assert screen.splitlines()[0].strip().startswith("sim · 2/2 nodes up"), screen
            tmux.keys("?")
            tmux.wait_for("Keys (")
            tmux.keys("End")  # the help scrolls to its notes
            tmux.wait_for("Remap a key with keymap: {ID: KEY}")
            tmux.wait_for("in the config.")
            tmux.keys("Escape")
            tmux.wait_gone("Keys (")  # a person waits for the dialog to go (ESC then q at once is alt+q)
            tmux.keys("q")
            tmux.wait_exit(20)
        finally:
            tmux.close()


def _pane_child(tmux: Tmux) -> int:
    shell = int(tmux("list-panes", "-t", "app", "-F", "#{pane_pid}").strip())
    children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    return int(children[0])


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _terminate_and_wait(tmux: Tmux, what: str) -> str:
    pid = _pane_child(tmux)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30  # a bound, not the goal (bench-free figure: see the report of a run)
    while not _gone(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not end on SIGTERM:\n{tmux.screen()}")
        time.sleep(0.05)
    return tmux.wait_for("EXITED 0", 10)  # the shell after it: the terminal is back, exit status 0


def test_sigterm_ends_the_tui_and_gives_the_terminal_back(tmp_path):
    with running_nodes(tmp_path / "nodes") as config:
        tmux = _app(tmp_path, 100, 30, "--config", str(config), tail="; echo EXITED $?; sleep 30")
        try:
            tmux.wait_for("2/2 nodes up")
            screen = _terminate_and_wait(tmux, "the TUI")
            assert "nodes up" not in screen, screen  # the alternate screen is gone
        finally:
            tmux.close()


def test_sigterm_ends_the_demo_and_everything_it_started(tmp_path):
    from sparktui.demo.cluster import PREFIX

    from ..demo.conftest import require_namespaces

    require_namespaces()
    tmux = _app(
        tmp_path,
        100,
        30,
        "demo",
        "--model-mb",
        "4",
        "--speed",
        "40",
        tail="; echo EXITED $?; sleep 30",
        TMPDIR=str(tmp_path),
    )
    try:
        tmux.wait_for("2/2 nodes up", 120)
        [root] = list(tmp_path.glob(f"{PREFIX}*"))
        _terminate_and_wait(tmux, "sparktui demo")
        assert not root.exists()
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, str(root))]
        assert left == [], left
    finally:
        tmux.close()


def _cmdline_has(proc: Path, text: str) -> bool:
    try:
        return text.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False
