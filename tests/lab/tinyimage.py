"""A tiny root filesystem tarball (static busybox) for `docker import`: a real image in a few MB."""

from __future__ import annotations

import io
import shutil
import tarfile
import time
from pathlib import Path

TAG = "sparktui/lab-tiny:latest"
APPLETS = (
    "sh",
    "ls",
    "cat",
    "echo",
    "sleep",
    "ip",
    "id",
    "ps",
    "env",
    "grep",
    "wc",
    "nc",
    "touch",
    "mkdir",
    "rm",
    "test",
    "[",
    "true",
    "false",
    "printf",
    "hostname",
    "mount",
    "df",
    "kill",
)


def build(dest: Path) -> Path:
    """Write the tarball to dest: /bin/busybox, its applets as links, and the usual empty dirs."""
    busybox = shutil.which("busybox")
    if not busybox:
        raise FileNotFoundError("busybox (apt: busybox-static)")
    now = time.time()
    with tarfile.open(dest, "w") as tar:
        for d in ("bin", "etc", "tmp", "proc", "sys", "dev", "root", "run"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755, now
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox")
        for a in APPLETS:
            info = tarfile.TarInfo(f"bin/{a}")
            info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, "busybox", 0o777, now
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size, info.mode, info.mtime = len(passwd), 0o644, now
        tar.addfile(info, io.BytesIO(passwd))
    return dest
