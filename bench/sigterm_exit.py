"""SIGTERM to exit: `sparktui demo` (the TUI on its own simulated nodes) against `sparktui demo up`
(the same nodes, no TUI), each started, left idle until its nodes are up, then sent SIGTERM; the
seconds until the process is gone, and the ratio. Same run, side by side. The goal is 2 s for the TUI.

    python bench/sigterm_exit.py [--repeat 3]

The TUI runs in a tmux session of its own (-L); everything it starts lives under a temporary
directory that must be gone when the process is.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"PYTHONPATH": str(ROOT)}


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _wait_gone(pid: int, limit: float = 60.0) -> float:
    t0 = time.monotonic()
    while not _gone(pid):
        if time.monotonic() - t0 > limit:
            raise SystemExit(f"pid {pid} still there after {limit:g} s")
        time.sleep(0.01)
    return time.monotonic() - t0


def headless(tmp: Path) -> float:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparktui", "demo", "up", "--json"],
        cwd=ROOT,
        env=ENV | {"TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    if not ready or not proc.stdout.readline():
        proc.kill()
        raise SystemExit("demo up did not start")
    proc.send_signal(signal.SIGTERM)
    took = _wait_gone(proc.pid)
    proc.wait()
    return took


def tui(tmp: Path) -> float:
    sock = f"sparktui-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    tmux = ["tmux", "-L", sock]
    env = " ".join(
        f"{k}={v}" for k, v in {"PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), "TERM": "xterm-256color"}.items()
    )
    subprocess.run(
        tmux
        + [
            "new-session",
            "-d",
            "-s",
            "b",
            "-x",
            "100",
            "-y",
            "30",
            f"env -u COLUMNS -u LINES {env} {sys.executable} -m sparktui demo; sleep 30",
        ],
        check=True,
    )
    try:
        deadline = time.monotonic() + 120
        while "nodes up" not in subprocess.run(
            tmux + ["capture-pane", "-p", "-t", "b"], capture_output=True, text=True
        ).stdout.replace("0/", "x/"):
            if time.monotonic() > deadline:
                raise SystemExit("the demo TUI did not come up")
            time.sleep(0.1)
        shell = subprocess.run(
            tmux + ["list-panes", "-t", "b", "-F", "#{pane_pid}"], capture_output=True, text=True
        ).stdout.strip()
        pid = int(Path(f"/proc/{shell}/task/{shell}/children").read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        return _wait_gone(pid)
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for _ in range(args.repeat):
        for name, run in (("demo up (no TUI)", headless), ("demo (TUI)", tui)):
            with tempfile.TemporaryDirectory(prefix="sparktui-bench-") as d:
                took = run(Path(d))
                left = list(Path(d).glob("sparktui-demo-*"))
                rows.append((name, took, bool(left)))
    for name in ("demo up (no TUI)", "demo (TUI)"):
        times = sorted(t for n, t, _ in rows if n == name)
        print(
            f"{name:18} SIGTERM to exit: median {times[len(times) // 2]:.2f} s  (runs: "
            f"{', '.join(f'{t:.2f}' for t in times)})"
        )
    base = sorted(t for n, t, _ in rows if n.startswith("demo up"))
    mine = sorted(t for n, t, _ in rows if n == "demo (TUI)")
    print(
        f"ratio TUI / no TUI: {mine[len(mine) // 2] / base[len(base) // 2]:.2f}; "
        f"left behind: {sum(left for _, _, left in rows)} of {len(rows)} runs"
    )


if __name__ == "__main__":
    main()
