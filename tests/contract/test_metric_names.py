"""The /metrics series sparktui reads, as each supported release of each engine declares them.

Reads the release's own installed source (the contract environments): every name that
sparktui.core.engines.metricnames gives for that release must be declared there, a Counter either
under its sample name or without the `_total` that prometheus_client adds to its samples.
"""

from __future__ import annotations

import re

import pytest

from sparktui.core.engines.metricnames import KINDS, names_for

from .venvs import Release, python_of, venv_dir


def _declared(r: Release) -> set[str]:
    if python_of(r) is None:
        pytest.skip(f"contract environment {r.key} is not built: python3 -m tests.contract.venvs")
    site = next((venv_dir(r) / "lib").glob("python3*/site-packages"))
    prefix = f"{r.engine}:"
    names: set[str] = set()
    for f in (site / r.engine).rglob("*.py"):
        text = f.read_text(encoding="utf-8", errors="replace")
        if prefix in text:
            names.update(re.findall(r"""["'](%s[\w:]+)["']""" % re.escape(prefix), text))
    assert names, f"no {prefix} series found in {site / r.engine}"
    return names


def _check(r: Release) -> None:
    declared = _declared(r)
    for fld, name in names_for(r.engine, r.version).items():
        ok = name in declared or (KINDS[fld] == "counter" and name.endswith("_total") and name[:-6] in declared)
        assert ok, f"{r.key}: {fld} is read from {name}, which this release does not declare"


def test_vllm_series_names_are_declared_by_the_release(vllm_release):
    _check(vllm_release)


def test_sglang_series_names_are_declared_by_the_release(sglang_release):
    _check(sglang_release)
