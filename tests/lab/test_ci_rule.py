"""tests/conftest.py: under CI=true a skipped lab test fails; elsewhere it stays a skip."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SAMPLE = """
import pytest

@pytest.mark.lab
def test_lab_thing():
    pytest.skip("no lab here")

def test_plain_thing():
    pytest.skip("not a lab test")

@pytest.mark.lab
@pytest.mark.xfail(reason="known")
def test_lab_xfail():
    assert False
"""


def run_sample(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    # Load the suite's conftest as a plugin; the sample lives outside tests/ so nothing else applies.
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            "-o",
            "markers=lab",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_sample.py"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("ci", ["true", "1"])
def test_a_skipped_lab_test_fails_in_ci(tmp_path, ci):
    r = run_sample(tmp_path, ci)
    assert r.returncode == 1, r.stdout
    assert re.search(r"^FAILED \S*test_sample.py::test_lab_thing", r.stdout, re.M), r.stdout
    assert "counts as a failure: no lab here" in r.stdout
    assert "SKIPPED" in r.stdout and "not a lab test" in r.stdout  # other tiers keep their skips
    assert "XFAIL" in r.stdout  # an expected failure is not a skip


@pytest.mark.parametrize("ci", [None, "false"])
def test_a_skipped_lab_test_stays_a_skip_outside_ci(tmp_path, ci):
    r = run_sample(tmp_path, ci)
    assert r.returncode == 0, r.stdout
    assert "2 skipped" in r.stdout and "1 xfailed" in r.stdout
