"""Which demos this user runs: one small JSON file per demo in a directory only this user can write.

$XDG_STATE_HOME/sparktui/demos (default ~/.local/state/sparktui/demos), mode 0700. `demo down` reads
only this, never the shared temp directory: a file another user can plant must not choose what gets
signalled. A file or directory not owned by this euid, or writable by others, is ignored whole.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from . import proc

ID = re.compile(r"[A-Za-z0-9_]+")  # what tempfile.mkdtemp puts after the prefix


def directory() -> Path:
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "sparktui" / "demos"


def private(st: os.stat_result, kind: int) -> bool:
    """Of the right kind (no symlink), this euid's, and writable by no one else."""
    return (
        stat.S_IFMT(st.st_mode) == kind and st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


@dataclass
class Entry:
    id: str
    pid: int
    start_ticks: int  # field 22 of /proc/PID/stat: with boot_id, proves the pid is still the demo
    boot_id: str
    host: str  # a home shared between machines: another host's pids mean nothing here
    started: float
    root: str
    config: str
    background: bool = False  # `demo up`: stopped by `demo down` without an id
    keep: bool = False  # its directory outlives it on purpose

    def alive(self) -> bool:
        """Its process is still the one that wrote the entry (a reused pid is not)."""
        return self.boot_id == proc.boot_id() and proc.start_ticks(self.pid) == self.start_ticks


def entry_for_self(id: str, started: float, root: Path, background: bool, keep: bool) -> Entry:
    return Entry(
        id=id,
        pid=os.getpid(),
        start_ticks=proc.start_ticks(os.getpid()) or 0,
        boot_id=proc.boot_id(),
        host=socket.gethostname(),
        started=started,
        root=str(root),
        config=str(root / "sparktui.yaml"),
        background=background,
        keep=keep,
    )


def _open_dir(create: bool) -> Path | None:
    d = directory()
    if create:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        ok = private(os.lstat(d), stat.S_IFDIR)
    except OSError:
        return None
    return d if ok else None


def add(entry: Entry) -> Path:
    """Writes the entry (0600, atomically); returns its path, for remove()."""
    d = _open_dir(create=True)
    if d is None:
        raise PermissionError(f"{directory()} is not a directory of this user's alone; sparktui will not use it")
    path = d / f"{entry.id}.json"
    tmp = d / f".{entry.id}.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(asdict(entry), f)
    os.replace(tmp, path)
    return path


def remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _read(path: Path) -> Entry | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not private(os.fstat(fd), stat.S_IFREG):
            return None
        with os.fdopen(fd, encoding="utf-8", closefd=False) as f:
            d = json.load(f)
        e = Entry(**{k: d[k] for k in Entry.__dataclass_fields__ if k in d})
        if not (ID.fullmatch(e.id) and e.id == path.stem and isinstance(e.pid, int) and e.pid > 1):
            return None
    except (OSError, ValueError, TypeError):
        return None
    finally:
        os.close(fd)
    return e


def entries() -> list[tuple[Path, Entry]]:
    """This user's entries on this host (alive or not), those that pass the ownership checks."""
    d = _open_dir(create=False)
    if d is None:
        return []
    out = []
    for path in sorted(d.glob("*.json")):
        e = _read(path)
        if e is not None and e.host == socket.gethostname():
            out.append((path, e))
    return out
