"""Engine simulator: SGLang, vLLM and Ray as they look from outside, without GPUs.

Stdlib only, so it runs on a bare python3 >= 3.10 inside a tiny image (tools/build_sim_image.py)
or directly on a host (`sparktui demo`). It speaks the engines' flags, prints their log lines in
their order with scaled pacing, does a real TCP rendezvous and serves real HTTP endpoints.
See README.md in this directory for scenarios and environment variables.
"""

from __future__ import annotations

import os
from pathlib import Path

SHIMS_DIR = Path(__file__).resolve().parent / "shims"
"""Holds the top-level `sglang`, `vllm`, `ray` and `torch` (the preflight's slice) packages and bin/ launchers."""

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""Directory that holds the `sparktui` package (goes on PYTHONPATH next to SHIMS_DIR)."""


def sim_env(
    base: dict[str, str] | None = None,
    *,
    speed: float | None = None,
    scenarios: tuple[str, ...] | list[str] = (),
    interfaces: str | None = None,
) -> dict[str, str]:
    """Environment for running the simulator as host processes (`python3 -m sglang.launch_server`,
    `vllm serve`, `ray start`): shim packages on PYTHONPATH, launchers on PATH, knobs set."""
    env = dict(os.environ if base is None else base)
    paths = [str(SHIMS_DIR), str(PACKAGE_ROOT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PATH"] = os.pathsep.join([str(SHIMS_DIR / "bin"), env.get("PATH", os.defpath)])
    env["PYTHONUNBUFFERED"] = "1"
    if speed is not None:
        env["SPARKTUI_SIM_SPEED"] = repr(float(speed))
    if scenarios:
        env["SPARKTUI_SIM_SCENARIO"] = ",".join(scenarios)
    if interfaces is not None:
        env["SPARKTUI_SIM_INTERFACES"] = interfaces
    return env
