"""PID 1 of a simulated node: sets up the node's mounts, then holds its namespaces open.

Run by namespaces.py as `unshare --user --map-root-user --mount --pid --fork --mount-proc
python3 -m sparktui.demo.holder SPEC_JSON`. SPEC_JSON: {"binds": [[src, dst], ...], "optional":
[[src, dst], ...], "hostname": name, "page_cache": [drop_caches, meminfo] or null}; a failed required bind exits 1 with the reason, a failed optional one is
reported and skipped. Prints `ready` once the mounts are in place, then waits for EOF on stdin:
the demo process holds the other end, so when it exits (even killed) this process ends, and the
kernel ends every process of the node's PID namespace with it: containers, transfers, everything.
Stdlib only: it starts once per node and must start fast.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys


def _reap(*_: object) -> None:
    # Orphans of detached jobs (setsid nohup rsync ...) are re-parented to PID 1: collect them.
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _bind(src: str, dst: str) -> str | None:
    r = subprocess.run(["mount", "--bind", src, dst], capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip() or f"mount exit {r.returncode}")


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0]) if argv else {}
    for src, dst in spec.get("binds", []):
        why = _bind(src, dst)
        if why:
            print(f"cannot bind {src} over {dst}: {why}", file=sys.stderr, flush=True)
            return 1
    if spec.get("hostname"):
        socket.sethostname(spec["hostname"])  # the node's own UTS namespace: `hostname` says its name
    for src, dst in spec.get("optional", []):
        why = _bind(src, dst)
        if why:
            print(f"note: {dst} left as it is ({why})", file=sys.stderr, flush=True)
    if spec.get("page_cache"):
        from .pagecache import PageCache

        try:
            PageCache(*spec["page_cache"]).start()
        except OSError as e:  # a write to drop_caches then changes nothing (and flushes nothing here)
            print(f"note: drop_caches not simulated ({e})", file=sys.stderr, flush=True)
    signal.signal(signal.SIGCHLD, _reap)
    # PID 1 gets no default action for SIGTERM: without a handler the demo could not stop it.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the demo's terminal is the demo's business
    print("ready", flush=True)
    while sys.stdin.buffer.read(65536):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
