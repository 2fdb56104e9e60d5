"""Processes that look like a running `sparktui demo up` to /proc, registered as the demo registers itself."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from sparktui.demo import proc, registry
from sparktui.demo.cluster import PREFIX


def demo_process(where: Path) -> subprocess.Popen:
    """A harmless process whose command line is `python .../sparktui demo up`; it ends when stdin closes."""
    script = where / "sparktui"
    if not script.exists():
        script.write_text("import sys\nsys.stdin.read()\n")
    return subprocess.Popen([sys.executable, str(script), "demo", "up"], stdin=subprocess.PIPE)


def entry(name: str, pid: int, root: Path, background: bool = True) -> registry.Entry:
    return registry.Entry(
        id=name,
        pid=pid,
        start_ticks=proc.start_ticks(pid),
        boot_id=proc.boot_id(),
        host=socket.gethostname(),
        started=time.time(),
        root=str(root),
        config=str(root / "sparktui.yaml"),
        background=background,
    )


def registered(where: Path, name: str, background: bool = True) -> subprocess.Popen:
    """A demo process, its directory (with a key in it, as a demo's) and its registry entry."""
    p = demo_process(where)
    root = where / f"{PREFIX}{name}"
    (root / "client").mkdir(parents=True, mode=0o700)
    (root / "client" / "id_ed25519").write_text("key\n")
    registry.add(entry(name, p.pid, root, background))
    return p


def end(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_dead(pid: int, timeout: float = 10.0) -> None:
    """Until /proc no longer shows pid as a live process (a deadline, not a sleep)."""
    deadline = time.monotonic() + timeout
    while proc.start_ticks(pid) is not None:
        assert time.monotonic() < deadline, f"pid {pid} still alive"
        time.sleep(0.02)
