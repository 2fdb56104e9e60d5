"""What every command checks before it starts: the theme, a terminal for the TUI; `demo down`'s reach."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.demo.cluster import PREFIX
from tests.unit import demofakes

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, stdin=None, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(REPO), **kw)
    return subprocess.run(
        [sys.executable, "-m", "sparktui", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=stdin,
        timeout=60,
        cwd=REPO,
    )


@pytest.mark.parametrize("command", [["demo"], ["demo", "up"], ["journal"], []])
def test_an_unknown_theme_stops_every_command_with_the_list(command, capsys):
    assert main(["--theme", "neon", *command]) == 2
    err = capsys.readouterr().err
    assert "unknown theme 'neon'" in err and "dark" in err and "high-contrast" in err


def test_the_tui_refuses_without_a_terminal(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "cluster: c\nnodes: [{name: a, host: 127.0.0.1}]\nmodel: {name: m, path: /m}\nimages: {sglang: s, vllm: v}\n"
    )
    r = _run("--config", str(cfg), stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r
    assert "needs a terminal" in r.stderr and "\x1b[" not in r.stdout and r.stdout == ""


def test_the_demo_tui_refuses_without_a_terminal_before_starting_nodes(tmp_path):
    r = _run("demo", stdin=subprocess.DEVNULL, TMPDIR=str(tmp_path))
    assert r.returncode == 2 and "needs a terminal" in r.stderr and "demo up" in r.stderr, r
    assert "starting the simulated nodes" not in r.stderr and not list(tmp_path.glob(f"{PREFIX}*"))


def test_demo_down_without_an_id_stops_only_background_demos(tmp_path, capsys):
    up = demofakes.registered(tmp_path, "bg", True)
    mine = demofakes.registered(tmp_path, "tty", False)
    try:
        assert main(["demo", "down", "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"stopped": ["bg"], "failed": []}
        assert up.wait(10) == -signal.SIGTERM
        assert mine.poll() is None
        assert main(["demo", "down"]) == 1  # nothing in the background now; says how to stop the others
        err = capsys.readouterr().err
        assert "interactive" in err and "sparktui demo down tty" in err
        assert main(["demo", "down", "tty", "--json"]) == 0  # named: the user means it
        assert mine.wait(10) == -signal.SIGTERM
    finally:
        demofakes.end(up, mine)
