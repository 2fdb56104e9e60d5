"""Piped into a file or another program, the CLI's sentences end where sparktui ends them: rich's
80-column default for a non-terminal never breaks one in the middle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "tests" / "corpus" / "nccl_socket_ifname_missing_interface.log"
HINT = (
    "  hint: set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to this node's own interface on the rendezvous "
    "subnet (names differ between nodes; sparktui plans set them per node)"
)


def test_a_long_sentence_piped_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(REPO), XDG_STATE_HOME=str(tmp_path))
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", "diagnose", str(LOG)],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    lines = r.stdout.splitlines()
    assert HINT in lines, r.stdout  # whole, not cut at column 80 and carried on below
    assert any(
        ln.startswith("log: reached NCCL communicator init; last line 13: ")
        and ln.endswith("is neither AF_INET(2) nor AF_INET6(10)")
        for ln in lines
    ), r.stdout
