"""The in-process nodes run their commands in homes of their own, never the user's (tests/hermetic.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from sparktui.core.remote.ssh import Cluster
from tests import userstate

REPO = Path(__file__).resolve().parents[2]


async def test_each_node_runs_in_a_home_of_its_own(ssh_env, tmp_path):
    cfg, _ = await ssh_env(2)
    async with Cluster(cfg) as c:
        seen = [(await c[n].run('echo "$HOME $XDG_STATE_HOME"; cd && pwd -P')).stdout.split() for n in ("n1", "n2")]
    sandbox = tmp_path.with_name(tmp_path.name + "-homes").resolve()
    assert seen == [[str(sandbox / n), str(sandbox / n / ".local/state"), str(sandbox / n)] for n in ("node1", "node2")]
    assert os.environ["HOME"] == str(tmp_path.with_name(tmp_path.name + "-homes") / "client")


def test_status_ignores_and_keeps_the_users_transfers(tmp_path):
    """The failure that started this: `status` listed the user's own transfers through a test's node."""
    home = tmp_path / "user"
    userstate.fill(home)
    state = home / ".local/state/sparktui"
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in state.rglob("*") if p.is_file()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path / "t"),
            "tests/ssh/test_check_cli.py::test_status_adds_transfers_and_deployments",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:]
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in state.rglob("*") if p.is_file()} == before
