"""asyncssh is imported without the compiler runs of ctypes' library lookup (gcc, ld)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    # gcc and ld stand-ins that leave a mark when run, ahead of the real ones
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for tool in ("gcc", "cc", "ld"):
        (fake / tool).write_text(f"#!/bin/sh\necho {tool} >> {tmp_path / 'ran'}\nexit 1\n")
        (fake / tool).chmod(0o755)
    env = {"PYTHONPATH": str(REPO), "PATH": f"{fake}:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=60)


def test_importing_the_ssh_layer_runs_no_compiler_and_leaves_ctypes_as_it_was(tmp_path):
    import ctypes.util

    if ctypes.util.find_library("oqs") or ctypes.util.find_library("liboqs"):
        pytest.skip("liboqs is installed: the linker cache answers and nothing more is run either way")
    control = _run("import ctypes.util; ctypes.util.find_library('oqs')", tmp_path)
    assert control.returncode == 0 and (tmp_path / "ran").exists()  # the plain lookup does run them
    os.remove(tmp_path / "ran")
    r = _run(
        "import ctypes.util; f = ctypes.util.find_library\nimport sparktui.core.remote.ssh, asyncssh\n"
        "assert ctypes.util.find_library is f\nprint(asyncssh.__version__)",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "ran").exists()
