"""`b` in `sparktui demo` in a real terminal (tmux): once the engine serves, the benchmark screen runs the
simulated image's `vllm bench serve` on the head and shows its rows. Driven by keys, read from the screen."""

from __future__ import annotations

import os
import re
import shlex
import shutil

import pytest

from ..tmuxterm import Tmux
from .conftest import require_namespaces, sparktui_argv

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

WIDTH, HEIGHT = 140, 40


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    e = dict(os.environ, TMPDIR=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"), TERM="xterm-256color")
    e.pop("TMUX", None)
    return e


def bench_rows(screen: str) -> list[tuple[str, ...]]:
    """(concurrency, TTFT p50, ITL p50, out tok/s, req/s) for each row of the benchmark's table."""
    return re.findall(r"(?<![\d.])(\d+)\s+(\d+) ms\s+\d+ ms\s+([\d.]+) ms\s+([\d.]+)\s+([\d.]+)", screen)


def test_b_in_the_demo_shows_the_clients_rows(tmp_path, env):
    require_namespaces()
    cmd = (
        f"{shlex.join(sparktui_argv())} demo --scenario happy --speed 60 --model-mb 2 "
        f"--link-mbps 100; echo DEMO-EXITED rc=$?; sleep 60"
    )
    tui = Tmux(cmd, WIDTH, HEIGHT, env, prefix="sparktui-demo-test")
    try:
        tui.wait_for(
            lambda s: "DEMO — simulated cluster" in s and re.search(r"2/2 (nodes )?up", s), 120, "both nodes up"
        )
        tui.keys("t")
        tui.wait_for("verified:", 60)
        tui.keys("C-r", "BTab")
        tui.wait_for(
            lambda s: "model missing" not in s and s.count("model 2.0 MiB") == 2, 60, "the model on both nodes"
        )
        tui.keys("l")
        tui.wait_for("Launch demo-moe-30b-a3b", 30)
        tui.keys("C-s")
        tui.wait_for("● READY", 240)
        tui.keys("b")
        tui.wait_for("Benchmark on the head node", 30)
        # the table's title, then a row per concurrency (1, 8, 32) with its figures: the screen grows to
        # hold them after the title is drawn, so all of it is waited for together
        done = tui.wait_for(
            lambda s: "now: " in s and "esc closes" in s and len(bench_rows(s)) >= 3,
            300,
            "the benchmark's title and its three rows",
        )
        rows = bench_rows(done)
        assert [r[0] for r in rows] == ["1", "8", "32"], done
        assert all(float(r[3]) > 0 and float(r[4]) > 0 for r in rows), done  # measured throughput
        assert "no benchmark client" not in done
        tui.keys("Escape")
        tui.wait_for(lambda s: "Benchmark on the head node" not in s, 30, "the benchmark screen closed")
        tui.keys("q")
        tui.wait_for("DEMO-EXITED rc=0", 90)
    finally:
        tui.close()
