"""`ruff check` and `ruff format --check` pass over the code, with the settings pyproject.toml names ([tool.ruff])."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PATHS = ["sparktui", "tests", "bench", "tools"]


NO_RUFF = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="ruff is not installed (pip install -e '.[test]' brings it)"
)


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", *PATHS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@NO_RUFF
def test_ruff_check_passes():
    r = ruff("check")
    assert r.returncode == 0, r.stdout + r.stderr


@NO_RUFF
def test_the_tree_is_formatted_as_ruff_format_writes_it():
    r = ruff("format", "--check")
    assert r.returncode == 0, "run `ruff format sparktui tests bench tools`:\n" + r.stdout + r.stderr
