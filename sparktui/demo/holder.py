"""PID 1 of a simulated node: sets up the node's mounts, then holds its namespaces open.

Run by namespaces.py as `unshare --user --map-root-user --mount --pid --fork --mount-proc
python3 -m sparktui.demo.holder SPEC_JSON`. SPEC_JSON: {"binds": [[src, dst], ...], "optional":
[[src, dst], ...], "hostname": name, "page_cache": [drop_caches, meminfo] or null, "rdma_dev": staging
directory or null}; a failed required bind exits 1 with the reason, a failed optional one is
reported and skipped. rdma_dev gives the node a /dev/infiniband as a Spark's (the RDMA devices' nodes). Prints `ready` once the mounts are in place, then waits for EOF on stdin:
the demo process holds the other end, so when it exits (even killed) this process ends, and the
kernel ends every process of the node's PID namespace with it: containers, transfers, everything.
Stdlib only: it starts once per node and must start fast.
"""

from __future__ import annotations

import ctypes
import ctypes.util
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


MS_BIND, MS_REC, MS_MOVE = 0x1000, 0x4000, 0x2000
# What a Spark's /dev/infiniband holds for its four RDMA devices (rdma-core's udev rules name them).
RDMA_NODES = ("rdma_cm", "uverbs0", "uverbs1", "uverbs2", "uverbs3")


def _mount(libc, src: str, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if (
        libc.mount(
            src.encode(), dst.encode(), fstype.encode() if fstype else None, flags, data.encode() if data else None
        )
        != 0
    ):
        e = ctypes.get_errno()
        raise OSError(e, f"mount {src} on {dst}: {os.strerror(e)}")


def _rdma_dev(stage: str) -> None:
    """A /dev that also holds infiniband/: a tmpfs with every entry of this machine's /dev bound back in
    (so /dev/null, /dev/pts, /dev/shm stay the real ones) plus infiniband/ with empty stand-ins, then
    moved over /dev. Only this node's mount namespace sees it."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    os.makedirs(stage, exist_ok=True)
    # mode 755 as a real /dev: tmpfs defaults to 1777, and in a sticky world-writable directory the
    # kernel refuses O_CREAT opens of a device its opener does not own (may_create_in_sticky), so for
    # an unprivileged user `>/dev/null` failed with "Permission denied" (root owns /dev/null).
    _mount(libc, "tmpfs", stage, "tmpfs", 0, "mode=755")
    for name in os.listdir("/dev"):
        src, dst = os.path.join("/dev", name), os.path.join(stage, name)
        try:
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
                continue
            if os.path.isdir(src):
                os.mkdir(dst)
            else:
                open(dst, "w").close()
            _mount(libc, src, dst, None, MS_BIND | MS_REC)
        except OSError:
            continue  # an entry this user cannot bind stays out; the node does not need it
    os.makedirs(os.path.join(stage, "infiniband"), exist_ok=True)
    for name in RDMA_NODES:
        open(os.path.join(stage, "infiniband", name), "w").close()
    _mount(libc, stage, "/dev", None, MS_MOVE)


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
    if spec.get("rdma_dev"):
        try:
            _rdma_dev(spec["rdma_dev"])
        except OSError as e:  # then the node has no /dev/infiniband, and plans say NCCL uses sockets
            print(f"note: /dev/infiniband not simulated ({e})", file=sys.stderr, flush=True)
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
