"""A container's own /etc, /root and /run, made in its mount namespace just before its command runs.

Images write there (TensorRT-LLM's entrypoint makes /root/.ssh and /run/sshd, the head gets
/etc/openmpi-hostfile): without this a demo run as root wrote this machine's /etc and /root/.ssh, and one
run by a user failed at the first write. Where this user may read and write the machine's directory
(root: this very Python may live under /root), the container gets an overlay of it that takes its
writes; elsewhere, or where the kernel refuses the overlay, a directory of its own with the machine's
entries bound back in (what this user may see of them, ~/.ssh never), so reads find the machine's files
and new files land in the container's directory.

    python3 -S -m sparktui.demo.docker.rootfs TARGET MINE [TARGET MINE ...] -- COMMAND [ARG ...]

With $SPARKTUI_SIM_MEMINFO set (the node's stand-in meminfo), binds it over the container's fresh
/proc/meminfo too. Execs COMMAND (which stays the container's PID 1); exit 125 with the reason when a directory cannot be
set up. Stdlib only: it runs at every container start.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

PRIVATE_DIRS = ("/etc", "/root", "/run")
# what a container writes into and must never reach on this machine, even bound back: the keys and
# environment TensorRT-LLM's entrypoint puts in ~/.ssh
NEVER_BOUND = {"/root": (".ssh",)}
MS_BIND, MS_REC = 0x1000, 0x4000


def _mount(libc, src: str, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if (
        libc.mount(
            src.encode(), dst.encode(), fstype.encode() if fstype else None, flags, data.encode() if data else None
        )
        != 0
    ):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def _bind_back(libc, target: str, mine: str) -> None:
    try:
        names = os.listdir(target)
    except OSError:  # a directory this user may not list (/root of another user): the container's own is empty
        names = []
    for name in names:
        if name in NEVER_BOUND.get(target, ()):
            continue
        src, dst = os.path.join(target, name), os.path.join(mine, name)
        if os.path.lexists(dst):
            continue  # the container wrote its own (or an earlier start of it made the mount point)
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
            continue  # an entry this user cannot bind stays out, as in the node's /dev


def own(libc, target: str, mine: str) -> None:
    os.makedirs(mine, exist_ok=True)
    if os.access(target, os.R_OK | os.W_OK | os.X_OK):
        work = mine + ".work"
        os.makedirs(work, exist_ok=True)
        try:
            _mount(libc, "overlay", target, "overlay", 0, f"lowerdir={target},upperdir={mine},workdir={work}")
            return
        except OSError:
            # in a user namespace the kernel will not overlay a directory with mounts locked beneath it
            # (/run/netns once `ip netns` ran): bind its entries back instead
            pass
    _bind_back(libc, target, mine)
    _mount(libc, mine, target, None, MS_BIND | MS_REC)


def main(argv: list[str]) -> int:
    if "--" not in argv:
        sys.stderr.write("usage: rootfs TARGET MINE ... -- COMMAND\n")
        return 125
    cut = argv.index("--")
    pairs, command = argv[:cut], argv[cut + 1 :]
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    for target, mine in zip(pairs[::2], pairs[1::2]):
        try:
            own(libc, target, mine)
        except OSError as e:
            sys.stderr.write(f"cannot give the container its own {target}: {e.strerror or e}\n")
            return 125
    node_meminfo = os.environ.get("SPARKTUI_SIM_MEMINFO")  # the node's, as a container sees its host's
    if node_meminfo and os.path.isfile(node_meminfo):
        try:
            _mount(libc, node_meminfo, "/proc/meminfo", None, MS_BIND)
        except OSError:
            pass  # the container reads this machine's meminfo; the engines still account on the node's file
    try:
        os.execvp(command[0], command)
    except OSError as e:
        sys.stderr.write(f"exec {command[0]}: {e.strerror or e}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
