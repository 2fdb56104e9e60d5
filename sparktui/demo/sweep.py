"""Removing what a demo killed with -9 left behind: its directory (the client's private key among it).

Only this euid's own directories, and only those no live demo holds: ones its registry names, and
ones in the temp directory with the demo's name pattern. Kept directories (`--keep`) stay.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

from . import proc, registry
from .cluster import PREFIX

NAME = re.compile(re.escape(PREFIX) + registry.ID.pattern)
GRACE = 60.0  # a directory younger than this without a demo.json may be a demo still writing its first one


def _ours(path: Path) -> bool:
    """A real directory (no symlink) named as a demo's, of this euid."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return NAME.fullmatch(path.name) is not None and registry.private(st, stat.S_IFDIR)


def _held(root: Path) -> bool:
    """Whether a live demo (or one still starting) may be using root, from its own demo.json."""
    try:
        fd = os.open(root / "demo.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, encoding="utf-8") as f:
            d = json.load(f)
        pid = int(d["pid"])
    except FileNotFoundError:
        try:
            return time.time() - os.lstat(root).st_mtime < GRACE
        except OSError:
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return True  # unreadable: not ours to judge
    if d.get("keep") is True:
        return True
    if "start_ticks" in d:
        return d.get("boot_id") == proc.boot_id() and proc.start_ticks(pid) == d["start_ticks"]
    began = proc.start_time(pid)  # a demo.json of an older sparktui: its start time in epoch seconds
    return began is not None and began <= float(d.get("started", 0)) + 2


def _remove(root: Path) -> bool:
    shutil.rmtree(root, ignore_errors=True)  # fd-based on Linux: no symlink inside leads it out
    return not os.path.lexists(root)


def sweep(temp: str | None = None) -> list[str]:
    """Removes this user's dead demos' directories and registry entries; returns the directories removed."""
    removed, live = [], set()
    for path, e in registry.entries():
        if e.alive():
            live.add(e.root)
            continue
        root = Path(e.root)
        if not e.keep and _ours(root):
            if not _remove(root):
                continue  # the entry stays, so a later sweep tries again
            removed.append(e.root)
        registry.remove(path)
    base = Path(temp or tempfile.gettempdir())
    try:
        candidates = sorted(base.iterdir())
    except OSError:
        candidates = []
    for root in candidates:
        if str(root) in live or not _ours(root) or _held(root):
            continue
        if _remove(root):
            removed.append(str(root))
    return removed
