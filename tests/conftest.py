"""Suite-wide rules.

- Tiers: each test is marked with its tier, from its directory (tests/unit -> `unit`, ...), so
  `pytest -m unit` runs one tier alone.
- CI (CI=true): a lab test that skips counts as a failure: CI runs as root with everything installed, so a
  skipped lab test there means the lab tier silently stopped running.
- Hermetic homes (tests/hermetic.py): every test, and every in-process SSH node, gets HOME and XDG
  directories of its own; a guard fails a test, and the suite, that touches the user's own sparktui files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import hermetic, sidebyside

HERE = Path(__file__).resolve().parent
TIERS = ("unit", "ssh", "tui", "lab", "contract", "fuzz", "demo", "install", "gpu")
_GUARD = pytest.StashKey[hermetic.Guard]()
_AT_START = pytest.StashKey[dict]()
_BEFORE = pytest.StashKey[dict]()
_SESSION_CHANGES = pytest.StashKey[list]()


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _is_lab_path(nodeid: str) -> bool:
    return nodeid.replace("\\", "/").startswith("tests/lab/") or "/tests/lab/" in nodeid


def _reason(longrepr) -> str:
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def _tier(path: Path) -> str | None:
    try:
        top = path.resolve().relative_to(HERE).parts[0]
    except (ValueError, IndexError):
        return None  # a test outside tests/ (a sample run by a test)
    return top if top in TIERS else None


# -- tiers ---------------------------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = _tier(Path(str(item.path)))
        if tier:
            item.add_marker(tier)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # side by side: the longest units first (tests/sidebyside.py)
        items.sort(key=lambda item: sidebyside.rank(item.nodeid))  # stable: a unit's tests keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return sidebyside.scheduler(config, log)


# -- CI: a skipped lab test fails ----------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "teardown":
        _guard_after_test(item, rep)
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


# -- hermetic homes and the guard ----------------------------------------------------------------
def pytest_configure(config):
    # sparktui's CLI takes COLUMNS as a width asked for; the suite's outputs must not depend on where it
    # runs (a shell that exports it, or pytest -n's workers, which start with COLUMNS=80)
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
    home = hermetic.user_home()
    cache = hermetic.pin_contract_cache()
    engine = hermetic.pin_engine_cache()
    guard = hermetic.Guard(home, exempt=[cache, home / hermetic.CONTRACT_CACHE, engine, home / hermetic.ENGINE_CACHE])
    config.stash[_GUARD] = guard
    config.stash[_AT_START] = guard.digests()
    hermetic.install_node_homes()


def pytest_unconfigure(config):
    hermetic.uninstall_node_homes()


@pytest.fixture(scope="session", autouse=True)
def _session_homes(tmp_path_factory):
    """Homes for what starts before any test's own (session and module fixtures: the lab, the demo)."""
    homes = hermetic.Homes(tmp_path_factory.mktemp("homes-session"))
    with pytest.MonkeyPatch.context() as mp:
        for name, value in homes.client().items():
            mp.setenv(name, value)
        mp.delenv("SPARKTUI_CONFIG", raising=False)
        hermetic.current = homes
        yield homes
    hermetic.current = None


@pytest.fixture(autouse=True)
def _test_homes(_session_homes, tmp_path, monkeypatch):
    """This test's homes, beside its tmp_path (see tests/hermetic.py)."""
    homes = hermetic.Homes(tmp_path.with_name(tmp_path.name + "-homes"))
    for name, value in homes.client().items():
        monkeypatch.setenv(name, value)
    hermetic.current = homes
    yield homes
    hermetic.current = _session_homes


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    guard = item.config.stash.get(_GUARD, None)
    if guard is not None:
        item.stash[_BEFORE] = guard.stats()


def _guard_after_test(item, rep) -> None:
    guard, before = item.config.stash.get(_GUARD, None), item.stash.get(_BEFORE, None)
    if guard is None or before is None:
        return
    lines = hermetic.changes(before, guard.stats())
    if not lines:
        return
    if rep.failed:  # keep the teardown's own error first
        rep.sections.append(("user files touched", hermetic.report(lines)))
    else:
        rep.outcome = "failed"
        rep.longrepr = hermetic.report(lines)


def pytest_sessionfinish(session, exitstatus):
    guard = session.config.stash.get(_GUARD, None)
    if guard is None:
        return
    lines = hermetic.changes(session.config.stash[_AT_START], guard.digests())
    session.config.stash[_SESSION_CHANGES] = lines
    if lines and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = config.stash.get(_SESSION_CHANGES, None)
    if lines:
        terminalreporter.section("user files touched", red=True)
        terminalreporter.write_line(hermetic.report(lines))
