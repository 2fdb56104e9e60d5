"""tests/conftest.py marks each test with its tier from its directory, so `pytest -m TIER` runs one tier."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FILES = {"unit": "tests/unit/test_tiers.py", "ssh": "tests/ssh/test_check_cli.py", "lab": "tests/lab/test_ci_rule.py"}


def collected(marker: str) -> list[str]:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            marker,
            *FILES.values(),
        ],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode in (0, 5), r.stdout + r.stderr  # 5: nothing selected
    return sorted({line.split("::")[0] for line in r.stdout.splitlines() if "::" in line})


@pytest.mark.parametrize("tier", sorted(FILES))
def test_a_tier_marker_selects_that_tier_alone(tier):
    assert collected(tier) == [FILES[tier]]


def test_every_tier_is_a_registered_marker_and_every_test_directory_a_tier():
    from tests.conftest import TIERS

    r = subprocess.run(
        [sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    registered = {line.split(":")[0].removeprefix("@pytest.mark.") for line in r.stdout.splitlines()}
    assert set(TIERS) <= registered
    assert {p.parent.name for p in (REPO / "tests").glob("*/test_*.py")} <= set(TIERS)
