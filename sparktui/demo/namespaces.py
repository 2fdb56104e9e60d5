"""Each simulated node's own view of the machine, without root: a user, mount and PID namespace.

Why namespaces: the config requires one absolute model path, the same on every node, yet every
node must hold its own files there (node 1 has the checkpoint, node 2 gets it by rsync). A mount
namespace per node binds the node's directory over that path. Unprivileged user namespaces make
this possible without root (`unshare --user --map-root-user`), the PID namespace makes the node's
processes end together with it, and `nsenter` runs every SSH command inside.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from pathlib import Path

from .errors import DemoError

UNSHARE = [
    "unshare",
    "--user",
    "--map-root-user",
    "--mount",
    "--uts",
    "--pid",
    "--fork",
    "--mount-proc",
    "--propagation",
    "private",
]
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding the sparktui package
NEEDED_TOOLS = {
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "mount": "util-linux (mount)",
    "rsync": "rsync",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
}
START_TIMEOUT = 20.0  # seconds a node's namespace may take to come up


def missing_tools() -> list[str]:
    """Tools the demo needs on this machine that are not on PATH, with the package to install."""
    return [f"{tool} ({pkg})" for tool, pkg in NEEDED_TOOLS.items() if shutil.which(tool) is None]


async def check_namespaces() -> None:
    """Raise DemoError with a plain reason when this machine cannot give nodes their own namespaces."""
    missing = missing_tools()
    if missing:
        raise DemoError("sparktui demo needs these tools on this machine: " + ", ".join(missing))
    proc = await asyncio.create_subprocess_exec(
        *UNSHARE,
        "sh",
        "-c",
        'mount -t tmpfs sparktui-check "${TMPDIR:-/tmp}" 2>&1',
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 15)
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        raise DemoError("`unshare --user` did not finish within 15 s") from None
    if proc.returncode != 0:
        why = out.decode(errors="replace").strip().splitlines()
        who = "root" if os.geteuid() == 0 else "this user"
        raise DemoError(
            "sparktui demo gives each simulated node its own view of the model path with unprivileged "
            f"user namespaces, and {who} cannot create them here ({why[-1] if why else 'exit ' + str(proc.returncode)}). "
            "Enable them (sysctl user.max_user_namespaces=15000; on Debian kernel.unprivileged_userns_clone=1; "
            "on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0) or run the demo in a VM or "
            "container that allows them."
        )


def _children(pid: int) -> list[int]:
    """Direct children of pid: /proc's children list, else a scan of every process's parent."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        found = [int(x) for x in text.split()]
        if found:
            return found
    except (OSError, ValueError):
        pass
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


class NodeNamespace:
    """The namespaces of one simulated node, held open by holder.py as the node's PID 1.

    binds: (src, dst) pairs that must work; optional: pairs that make the node look right but are
    not essential (/proc/meminfo, /sys/class/net).
    """

    def __init__(
        self,
        name: str,
        binds: list[tuple[str, str]],
        optional: list[tuple[str, str]] | None = None,
        hostname: str | None = None,
        page_cache: tuple[str, str] | None = None,
        rdma_dev: str | None = None,
    ):
        self.name = name
        self.hostname = hostname or name
        self.binds = binds
        self.optional = optional or []
        self.page_cache = page_cache  # (drop_caches file, meminfo file): see pagecache.py
        self.rdma_dev = rdma_dev  # a staging directory for the node's /dev with infiniband/ (holder.py)
        self.pid: int | None = None  # the holder as this machine sees it (nsenter's target)
        self.notes: list[str] = []
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        spec = json.dumps(
            {
                "binds": self.binds,
                "optional": self.optional,
                "hostname": self.hostname,
                "page_cache": self.page_cache,
                "rdma_dev": self.rdma_dev,
            }
        )
        env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
        # A session of its own: Ctrl-C in the demo's terminal must not reach the node.
        self._proc = await asyncio.create_subprocess_exec(
            *UNSHARE,
            sys.executable,
            "-S",
            "-m",
            "sparktui.demo.holder",
            spec,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self._proc.stdout is not None and self._proc.stderr is not None
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT)
        except asyncio.TimeoutError:
            line = b""
        if line.strip() != b"ready":
            await self.stop()
            err = b""
            with contextlib.suppress(asyncio.TimeoutError):
                err = await asyncio.wait_for(self._proc.stderr.read(), 2)
            raise DemoError(
                f"{self.name}: the node's namespace did not come up: "
                f"{err.decode(errors='replace').strip() or 'no answer'}"
            )
        # The holder is unshare's child (unshare --fork); nsenter must target the holder itself.
        kids = _children(self._proc.pid)
        if not kids:
            await self.stop()
            raise DemoError(f"{self.name}: cannot find the node's first process under {self._proc.pid}")
        self.pid = kids[0]
        asyncio.ensure_future(self._collect_notes())

    async def _collect_notes(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        with contextlib.suppress(Exception):
            async for raw in self._proc.stderr:
                self.notes.append(raw.decode(errors="replace").strip())

    def enter_argv(self) -> list[str]:
        """argv prefix that runs a command inside this node (as its root)."""
        if self.pid is None:
            raise DemoError(f"{self.name}: the node is not running")
        # --preserve-credentials: no setgroups() call, which a user namespace forbids.
        return ["nsenter", "-t", str(self.pid), "-U", "-m", "-u", "-p", "--preserve-credentials"]

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def stop(self, timeout: float = 5.0) -> None:
        """End the node: its PID 1 exits and the kernel ends every process of the node with it."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout)
            return
        except asyncio.TimeoutError:
            pass
        for pid in (self.pid, proc.pid):
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), timeout)
