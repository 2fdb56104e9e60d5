"""The real engine's parts for the lab: the image of vLLM for CPUs (tools/build_engine_image.py) and tiny
checkpoints (tools/tiny_checkpoint.py), built once and cached beside the engine's environment. Shared by
tests/lab/test_real_engine.py and bench/launch_overhead.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import build_engine_image as engine_image  # noqa: E402

__all__ = ["engine_image", "engine_parts", "EngineUnavailable"]


class EngineUnavailable(RuntimeError):
    """The engine could not be installed here (no registry, no torch wheel)."""


def checkpoint(venv: Path, head_dim: int) -> Path:
    out = venv / f"tiny-qwen3moe-hd{head_dim}"
    if not (out / "config.json").exists():
        tmp = venv / f"{out.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                str(REPO / "tools" / "tiny_checkpoint.py"),
                str(tmp),
                "--head-dim",
                str(head_dim),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        tmp.rename(out)
    return out


def engine_parts() -> tuple[Path, Path, Path]:
    """(image tarball, checkpoint, checkpoint the CPU attention refuses), built once and cached beside the
    engine's environment."""
    try:
        venv = engine_image.ensure_venv()
    except (subprocess.CalledProcessError, OSError) as e:
        raise EngineUnavailable(
            f"the real engine could not be installed ({e}); run `python3 tools/build_engine_image.py`"
        ) from e
    built = subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_engine_image.py")], capture_output=True, text=True, timeout=900
    )
    if built.returncode != 0:
        raise EngineUnavailable(f"tools/build_engine_image.py failed: {built.stderr[-2000:]}")
    return venv / "image.tar", checkpoint(venv, 64), checkpoint(venv, 16)
