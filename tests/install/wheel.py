"""The wheel as a user's `pip install .` builds it: from the tracked files of the checkout only, so a
stale build/ directory or an untracked file can neither hide nor add anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def git(*args: str) -> str:
    # safe.directory: CI runs as root on a clone that another user may own
    return subprocess.run(
        ["git", "-c", f"safe.directory={REPO}", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def tracked(under: str = "") -> list[str]:
    return [f for f in git("ls-files", "-z", "--", under or ".").split("\0") if f and (REPO / f).exists()]


def executable(under: str) -> set[str]:
    """Tracked files whose mode in the index is 100755."""
    out = set()
    for line in git("ls-files", "-s", "--", under).splitlines():
        meta, _, name = line.partition("\t")
        if meta.split()[0] == "100755":
            out.add(name)
    return out


def build_wheel(out: Path) -> Path:
    """Copy the tracked files to out/src, build the wheel there with pip, return its path."""
    src = out / "src"
    for f in tracked():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, src / f)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(out / "dist")],
        check=True,
        timeout=600,
        env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    (wheel,) = (out / "dist").glob("sparktui-*.whl")
    return wheel


def wheel_modes(wheel: Path) -> dict[str, int]:
    """Every file in the wheel with its unix mode bits."""
    with zipfile.ZipFile(wheel) as z:
        return {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist() if not i.is_dir()}
