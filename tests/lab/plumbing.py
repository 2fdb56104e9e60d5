"""Plumbing for the lab: subprocess runs, `ip -batch`, process checks, the machine-wide lock, the
choice of a free 10.X.0.0/16, keys and small file edits. No knowledge of nodes here."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import ipaddress
import json
import os
import random
import select
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Sequence

BASE_DIR = Path(os.environ.get("SPARKTUI_LAB_DIR") or tempfile.gettempdir())
LOCK_FILE = Path("/run/sparktui-lab.lock")


class LabError(Exception):
    """Building or driving the lab failed."""


def rdma_name(iface: str) -> str:
    """The RoCE device name that goes with a ConnectX netdev: enp1s0f1np1 -> rocep1s0f1."""
    core = iface[2:] if iface.startswith("en") else iface
    if "np" in core:
        core = core[: core.rindex("np")]
    return "roce" + core


def twin_name(iface: str) -> str:
    """The other half of a ConnectX port on a GB10: enp1s0f1np1 <-> enP2p1s0f1np1 (PCI domain 2)."""
    return "en" + iface[4:] if iface.startswith("enP2p") else "enP2" + iface[2:]


def fingerprint(public_key: str) -> str:
    """OpenSSH's SHA256 fingerprint of "ALG BASE64 [comment]"."""
    blob = base64.b64decode(public_key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def run(argv: Sequence[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 60)
    r = subprocess.run(list(argv), **kw)
    if check and r.returncode != 0:
        raise LabError(f"{shlex.join(argv)} exited {r.returncode}: {(r.stderr or '').strip()}")
    return r


def ip_batch(lines: Iterable[str], netns: str | None = None) -> None:
    argv = ["ip"] + (["-n", netns] if netns else []) + ["-batch", "-"]
    run(argv, input="\n".join(lines) + "\n")


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def wait_gone(pids: Iterable[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    pids = list(pids)
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


class machine_lock:
    """An exclusive lock shared by every lab on this machine while one picks its subnets."""

    def __enter__(self):
        self.f = open(LOCK_FILE, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def free_block() -> str:
    """A 10.X.0.0/16 that no route of this machine (any table, other labs included) overlaps."""
    routes = json.loads(run(["ip", "-4", "-j", "route", "show", "table", "all"]).stdout or "[]")
    addrs = json.loads(run(["ip", "-4", "-j", "addr"]).stdout or "[]")
    used = []
    for r in routes:
        dst = r.get("dst", "")
        if dst and dst != "default":
            used.append(ipaddress.ip_network(dst, strict=False))
    for a in addrs:
        for info in a.get("addr_info", []):
            used.append(ipaddress.ip_network(f"{info['local']}/{info.get('prefixlen', 32)}", strict=False))
    second = list(range(64, 251))
    random.Random(os.getpid() ^ time.time_ns()).shuffle(second)
    for x in second:
        block = ipaddress.ip_network(f"10.{x}.0.0/16")
        if not any(block.overlaps(u) for u in used):
            return f"10.{x}"
    raise LabError("no free 10.X.0.0/16 block for the lab")


def keygen(path: Path, comment: str) -> None:
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def readline_within(stream, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    buf = b""
    fd = stream.fileno()
    while not buf.endswith(b"\n") and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 256)
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace")


def add_line(path: Path, line: str) -> None:
    text = path.read_text() if path.exists() else ""
    if line not in text.splitlines():
        path.write_text(text + ("" if not text or text.endswith("\n") else "\n") + line + "\n")
    path.chmod(0o600)


def drop_line(path: Path, line: str) -> None:
    if path.exists():
        path.write_text("".join(f"{x}\n" for x in path.read_text().splitlines() if x != line))
