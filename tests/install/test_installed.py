""".ci/run's wheel-install run: the wheel in a fresh venv, these tests copied outside the checkout,
SPARKTUI_INSTALLED=1. These prove that the demo tier run beside them exercised the installed package
(console script, package data) and not the sources."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not os.environ.get("SPARKTUI_INSTALLED"),
                                reason="runs in .ci/run's wheel-install run (SPARKTUI_INSTALLED=1)")

REPO = Path(__file__).resolve().parents[2]


def test_sparktui_is_imported_from_the_venv_not_the_checkout():
    import sparktui
    where = Path(sparktui.__file__).resolve()
    assert Path(sys.prefix).resolve() in where.parents and "site-packages" in where.parts, where
    assert not (REPO / "sparktui").exists(), "the tests run beside a source tree"


def test_the_console_script_runs_the_demo_help():
    r = subprocess.run([str(Path(sys.executable).parent / "sparktui"), "demo", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--scenario" in r.stdout


def test_the_simulator_launchers_are_installed_executable():
    from sparktui.sim import SHIMS_DIR
    for name in ("ray", "vllm"):
        assert os.access(SHIMS_DIR / "bin" / name, os.X_OK), name
