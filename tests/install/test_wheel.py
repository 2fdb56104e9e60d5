"""The built wheel carries exactly the package's tracked files, with their executable bits: a plain
`pip install .` must not lose the simulator's launchers (files without an extension) or ship strays.

.ci/run builds the wheel once and passes it in SPARKTUI_WHEEL; without it the wheel is built here."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from .wheel import build_wheel, executable, tracked, wheel_modes


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    given = os.environ.get("SPARKTUI_WHEEL")
    return Path(given) if given else build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_every_tracked_package_file_and_nothing_else(wheel):
    shipped = {n for n in wheel_modes(wheel) if n.startswith("sparktui/")}
    want = set(tracked("sparktui"))
    missing, extra = sorted(want - shipped), sorted(shipped - want)
    assert not missing, (
        "the wheel leaves out these tracked files; add a pattern to "
        "[tool.setuptools.package-data] in pyproject.toml:\n  " + "\n  ".join(missing)
    )
    assert not extra, "the wheel ships files that are not tracked under sparktui/:\n  " + "\n  ".join(extra)


def test_executable_files_stay_executable_in_the_wheel(wheel):
    modes = wheel_modes(wheel)
    launchers = executable("sparktui")
    assert "sparktui/sim/shims/bin/vllm" in launchers  # the demo's pivot execs these by name
    lost = sorted(f for f in launchers if not modes.get(f, 0) & 0o111)
    assert not lost, f"these files lose their executable bit in the wheel: {lost}"


def test_the_wheel_declares_the_console_script(wheel):
    with zipfile.ZipFile(wheel) as z:
        (ep,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert "sparktui = sparktui.cli:entry" in z.read(ep).decode()
