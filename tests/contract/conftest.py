"""Contract tier: sparktui's plans against the real engines' parsers and environment lists.

The environments are built by `python3 -m tests.contract.venvs` (.ci/run does it first, within a time
budget). A missing environment skips its tests with the command that builds it; every built one must pass.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from .venvs import MATRIX, PROBE, Release, python_of

_cache: dict[tuple, dict] = {}


def probe(r: Release, argvs: list[list[str]], env: list[str] = ()) -> dict:
    """The release's verdict on each argv, and which env names it reads (cached per question)."""
    key = (r.key, json.dumps(argvs), tuple(env))
    if key not in _cache:
        py = python_of(r)
        if py is None:
            pytest.skip(f"contract environment {r.key} is not built: python3 -m tests.contract.venvs")
        p = subprocess.run(
            [str(py), str(PROBE), r.engine],
            input=json.dumps({"argvs": argvs, "env": list(env)}),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert p.returncode == 0, f"{r.key} probe failed:\n{p.stderr[-3000:]}"
        _cache[key] = json.loads(p.stdout.strip().splitlines()[-1])
    return _cache[key]


def releases(engine: str) -> list[Release]:
    return [r for r in MATRIX if r.engine == engine]


def pytest_generate_tests(metafunc):
    for engine in ("vllm", "sglang", "ray"):
        name = f"{engine}_release"
        if name in metafunc.fixturenames:
            rs = releases(engine)
            metafunc.parametrize(name, rs, ids=[r.version for r in rs])
