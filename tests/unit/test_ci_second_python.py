"""CI runs the unit tier under a second CPython, newer than the floor in pyproject.toml (.ci/second-python)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "second-python"


def _floor() -> tuple[int, int]:
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    return tuple(int(x) for x in re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", spec).groups())


def _code(path: Path) -> list[str]:
    """The lines that run: no comments, no blank lines."""
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_second_python_is_a_newer_release_than_the_floor():
    release = re.search(r"^PY_RELEASE=(\d+)\.(\d+)$", SCRIPT.read_text(), re.M)
    assert release, "PY_RELEASE=3.X is missing from .ci/second-python"
    have = tuple(int(x) for x in release.groups())
    assert have >= (3, 12) and have > _floor(), f"the second python {have} is not newer than the floor {_floor()}"


def test_ci_runs_it_after_the_apt_step_bounded_and_a_failure_stops_ci():
    lines = _code(ROOT / ".ci" / "run")
    assert "set -euo pipefail" in lines  # a failing command ends .ci/run
    calls = [
        (i, int(m[1]))
        for i, line in enumerate(lines)
        if (m := re.fullmatch(r"timeout (\d+) bash \.ci/second-python", line))
    ]
    apt = [i for i, line in enumerate(lines) if line.startswith("apt-get install")]
    assert calls and apt and calls[0][0] > apt[0], (
        "`.ci/run` does not call `timeout N bash .ci/second-python` after apt"
    )
    assert calls[0][1] <= 2400  # CI has 90 minutes in all
    assert lines[-1].startswith("exec ") and calls[0][0] < len(lines) - 1


def test_it_runs_the_unit_tier_within_a_time_limit():
    code = "\n".join(_code(SCRIPT))
    assert "set -euo pipefail" in code
    run = re.search(r"^bounded (\d+) .*-m pytest .*-m unit tests/unit", code, re.M)
    assert run and 0 < int(run.group(1)) <= 1800, "the unit tier's pytest line is missing or unbounded"
    assert 'timeout "$1"' in code  # what `bounded` does
