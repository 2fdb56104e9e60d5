"""Undoing a lab from its saved state: used by Lab.destroy, `python3 -m tests.lab down` and the
reaper of labs whose owning process died without cleaning up."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Iterable

from .plumbing import BASE_DIR, alive, run, start_time, wait_gone


def teardown(state: dict) -> list[str]:
    """Undo a lab from its state; returns what could not be undone (empty when clean)."""
    problems: list[str] = []
    lab_dir = state.get("dir", "")
    inits = [n.get("pid") or 0 for n in state.get("nodes", [])]
    kill_ours([p for p in inits if p], lab_dir)  # a node's PID 1: the kernel kills the rest of the node
    wait_gone(inits, 20)
    # Each init's parent (unshare) exits once its child is gone; one that never got as far as a
    # ready node is killed here instead.
    holders = state.get("holders", [])
    if not wait_gone(holders, 2):
        kill_ours(holders, lab_dir)
    left = [p for p in inits + holders if p and alive(p)]
    if left:
        problems.append(f"processes still alive: {left}")
    for n in state.get("nodes", []):
        if n.get("cgroup"):
            problems += remove_cgroups(n["cgroup"])
    for ns in state.get("netns", []):
        r = run(["ip", "netns", "del", ns], check=False)
        if r.returncode and Path(f"/run/netns/{ns}").exists():
            problems.append(f"netns {ns}: {r.stderr.strip()}")
    for link in state.get("links", []):
        r = run(["ip", "link", "del", link], check=False)
        if r.returncode and Path(f"/sys/class/net/{link}").exists():
            problems.append(f"link {link}: {r.stderr.strip()}")
    for route in reversed(state.get("routes", [])):
        run(["ip", "route", "del", *route.split()], check=False)
    if lab_dir and not problems and Path(lab_dir).name.startswith("sparktui-lab-"):
        shutil.rmtree(lab_dir, ignore_errors=True)
    return problems


def kill_ours(pids: Iterable[int], lab_dir: str) -> None:
    for pid in pids:
        if alive(pid) and is_ours(pid, lab_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def is_ours(pid: int, lab_dir: str) -> bool:
    """The process runs this lab's node_init.sh (guards against a recycled pid)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(lab_dir) and any(c.startswith(lab_dir.encode()) for c in cmd)


def remove_cgroups(name: str) -> list[str]:
    left = []
    for hier in Path("/sys/fs/cgroup").iterdir():
        top = hier / name
        if not top.is_dir():
            continue
        for _ in range(50):  # a cgroup can stay busy for a moment after its last process exits
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]
            for d in dirs:
                try:
                    d.rmdir()
                except OSError:
                    pass
            if not top.exists():
                break
            time.sleep(0.05)
        if top.exists():
            left.append(f"cgroup {top}")
    return left


def reap_stale(base_dir: Path = BASE_DIR) -> None:
    """Tear down labs whose owning process died without cleaning up (e.g. SIGKILL)."""
    for f in base_dir.glob("sparktui-lab-*/lab.json"):
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        owner = state.get("owner_pid")
        if owner is None:  # started by `python3 -m tests.lab up`: only `down` removes it
            continue
        if alive(owner) and start_time(owner) == state.get("owner_start"):
            continue
        teardown(state)


def list_labs(base_dir: Path = BASE_DIR) -> list[dict]:
    out = []
    for f in sorted(base_dir.glob("sparktui-lab-*/lab.json")):
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    return out
