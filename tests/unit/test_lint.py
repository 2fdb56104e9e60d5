"""`ruff check` passes over the code, with the rules and exceptions pyproject.toml names ([tool.ruff])."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PATHS = ["sparktui", "tests", "bench", "tools"]


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (pip install -e '.[test]' brings it)")
def test_ruff_check_passes():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *PATHS], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
