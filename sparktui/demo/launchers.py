"""The executables on a simulated node's PATH: small sh launchers for the Python stand-ins.

DEMO/bin            what a node's shell finds first: ip, nvidia-smi, ibdev2netdev, docker, ssh,
                    ssh-keyscan, rsync (paced), nproc (a Spark's 20 cores), ping (the fabric halves),
                    python3, sudo (the node's user
                    is root: it runs the command)
DEMO/container-bin  what engine containers find: python3, python, nvidia-smi (the NVIDIA runtime
                    puts nvidia-smi into GPU containers)
Every other tool (sh, rsync's real binary, ssh-keygen, df, find, ...) is this machine's own.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .namespaces import PACKAGE_ROOT

NODE_TOOLS = {
    "ip": "sparktui.demo.tools.ip",
    "nvidia-smi": "sparktui.demo.tools.nvidia_smi",
    "ibdev2netdev": "sparktui.demo.tools.ibdev2netdev",
    "docker": "sparktui.demo.docker.cli",
    "ssh": "sparktui.demo.tools.ssh",
    "ssh-keyscan": "sparktui.demo.tools.ssh_keyscan",
    "rsync": "sparktui.demo.tools.rsync",
    "nproc": "sparktui.demo.tools.nproc",
    "ping": "sparktui.demo.tools.ping",
}
CONTAINER_TOOLS = {"nvidia-smi": "sparktui.demo.tools.nvidia_smi"}


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _module(module: str) -> str:
    # -S: the stand-ins use the standard library only, and start faster without site-packages.
    return f'#!/bin/sh\nPYTHONPATH={shlex.quote(PACKAGE_ROOT)} exec {shlex.quote(sys.executable)} -S -m {module} "$@"\n'


def _python() -> str:
    # A wrapper, not a symlink: a virtualenv's python finds its environment from its own path.
    return f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n'


def write(root: Path) -> tuple[Path, Path]:
    """Write DEMO/bin and DEMO/container-bin; returns both."""
    node_bin, container_bin = root / "bin", root / "container-bin"
    for d in (node_bin, container_bin):
        d.mkdir(parents=True, exist_ok=True)
    for name, module in NODE_TOOLS.items():
        _write(node_bin / name, _module(module))
    for name, module in CONTAINER_TOOLS.items():
        _write(container_bin / name, _module(module))
    # sudo as root with NOPASSWD: the fixes sparktui prints (`sudo ip link set ...`) run as typed.
    _write(
        node_bin / "sudo",
        '#!/bin/sh\nwhile [ "$#" -gt 0 ]; do case $1 in -n|-E|-H) shift ;; --) shift; break ;; '
        '*) break ;; esac; done\nexec "$@"\n',
    )
    for d in (node_bin, container_bin):
        _write(d / "python3", _python())
    _write(container_bin / "python", _python())
    return node_bin, container_bin
