"""Parsers for the probe sections that tell what a node has of what sparktui needs (docker usable by
the SSH user, the NVIDIA container toolkit, rsync); core/nodes/requirements.py judges them. Pure, never raise."""

from __future__ import annotations

import json
import re


def parse_runtimes(text: str) -> list[str]:
    """`docker info --format '{{json .Runtimes}}'`: the runtime names, e.g. ["nvidia", "runc"]."""
    try:
        rt = json.loads(text.strip() or "null")
    except ValueError:
        return []
    return sorted(rt) if isinstance(rt, dict) else []


def parse_rsync_version(text: str) -> str | None:
    """`rsync --version`: the version from `rsync  version 3.2.7  protocol version 31`."""
    m = re.search(r"^rsync\s+version\s+v?(\S+)", text, re.M)
    return m[1] if m else None


def parse_toolkit(text: str) -> tuple[list[str], list[str]]:
    """The probe's `tool PATH` / `cdi PATH` lines: NVIDIA container tools found, CDI specs naming GPUs."""
    tools, cdi = [], []
    for line in text.splitlines():
        kind, _, path = line.partition(" ")
        (tools if kind == "tool" else cdi if kind == "cdi" else []).append(path.strip())
    return tools, cdi


DOCKER_DENIED = "permission denied while trying to connect"
DOCKER_DOWN = "Cannot connect to the Docker daemon"


def docker_problem(stderr: str) -> str | None:
    """The line of `docker version`'s stderr that says why it failed (a config warning may come first)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for key in (DOCKER_DENIED, DOCKER_DOWN):
        hit = next((ln for ln in lines if key in ln), None)
        if hit:
            return hit
    return None
