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
from pathlib import Path

from . import proc, registry
from .cluster import PREFIX

NAME = re.compile(re.escape(PREFIX) + registry.ID.pattern)


def _ours(path: Path) -> bool:
    """A real directory (no symlink) named as a demo's, of this euid."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return NAME.fullmatch(path.name) is not None and registry.private(st, stat.S_IFDIR)


def _held(root: Path) -> bool:
    """Whether root may still be in use or wanted, from its own demo.json; True when in doubt."""
    try:
        fd = os.open(root / "demo.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, encoding="utf-8") as f:
            d = json.load(f)
        pid, ticks = int(d["pid"]), d["start_ticks"]
    except (OSError, ValueError, KeyError, TypeError):
        # none yet (a demo starting), unreadable, or from an older sparktui, which did not say --keep
        return True
    if d.get("keep") is not False:
        return True
    return d.get("boot_id") == proc.boot_id() and proc.start_ticks(pid) == ticks


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
