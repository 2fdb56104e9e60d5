"""Suite-wide rules. In CI (CI=true) a lab test that skips counts as a failure: CI runs as root
with everything installed, so a skipped lab test there means the lab tier silently stopped running."""
from __future__ import annotations

import os

import pytest


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _is_lab_path(nodeid: str) -> bool:
    return nodeid.replace("\\", "/").startswith("tests/lab/") or "/tests/lab/" in nodeid


def _reason(longrepr) -> str:
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not (_in_ci() and rep.skipped) or hasattr(rep, "wasxfail"):
        return
    if item.get_closest_marker("lab") is None and not _is_lab_path(item.nodeid):
        return
    rep.outcome = "failed"
    rep.longrepr = f"lab test skipped under CI=true, which counts as a failure: {_reason(rep.longrepr)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    rep = outcome.get_result()
    if _in_ci() and rep.skipped and _is_lab_path(rep.nodeid):
        rep.outcome = "failed"
        rep.longrepr = f"lab module skipped under CI=true, which counts as a failure: {_reason(rep.longrepr)}"
