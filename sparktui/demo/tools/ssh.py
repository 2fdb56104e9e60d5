"""`ssh` on a simulated node: reaches the other demo nodes, verified like `ssh -o BatchMode=yes` would.

A peer is named by any of its addresses (fabric, management, Wi-Fi) or its name; its SSH server
listens on those addresses at the demo's port for it. The real OpenSSH client does the work, told
the port and to check the host key under the address the user gave (HostKeyAlias), with this
node's own ~/.ssh (HOME, not the passwd entry). Anything else is refused here: nothing is dialled
outside the demo.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from .. import link
from ..hardware import NODE_ENV, demo_root, load
from .peers import table

WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")


def real_ssh() -> str | None:
    """The OpenSSH client, skipping this launcher's directory on PATH."""
    here = os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else ""
    mine = os.environ.get("SPARKTUI_DEMO_BIN", here)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != os.path.abspath(mine)
    )
    return shutil.which("ssh", path=path)


def split(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """(options, destination, remote command words)."""
    opts: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        opts.append(a)
        if len(a) == 2 and a[1] in WITH_ARG and i + 1 < len(argv):
            opts.append(argv[i + 1])
            i += 1
        i += 1
    if i >= len(argv):
        return opts, None, []
    return opts, argv[i], argv[i + 1 :]


def main(argv: list[str]) -> int:
    opts, dest, command = split(argv)
    if "-Q" in opts:  # a query of the client itself (`ssh -Q cipher`): nothing is dialled
        client = real_ssh()
        if client is None:
            sys.stderr.write("ssh: the OpenSSH client is not installed on this machine\n")
            return 127
        os.execv(client, [client, *argv])
    if dest is None:
        sys.stderr.write(
            "usage: ssh [-46AaCfGgKkMNnqsTtVvXxYy] [-B bind_interface] [-b bind_address] ... destination "
            "[command [argument ...]]\n"
        )
        return 255
    user, _, host = dest.rpartition("@")
    host = host.strip("[]")
    me = load()
    peers = table()
    for local in ("localhost", "127.0.0.1", me["hostname"]):
        peers.setdefault(local, peers[me["name"]])
    entry = peers.get(host)
    if entry is None:
        if any(c.isalpha() for c in host):
            sys.stderr.write(f"ssh: Could not resolve hostname {host}: Name or service not known\n")
        else:
            sys.stderr.write(f"ssh: connect to host {host} port 22: Connection refused\n")
        return 255
    client = real_ssh()
    if client is None:
        sys.stderr.write("ssh: the OpenSSH client is not installed on this machine\n")
        return 127
    home = os.environ.get("HOME", "")
    ours = [
        "-F",
        "/dev/null",
        "-p",
        str(entry["port"]),
        "-o",
        f"HostKeyAlias={host}",
        "-o",
        f"UserKnownHostsFile={home}/.ssh/known_hosts",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "IdentityAgent=none",
        "-o",
        "UpdateHostKeys=no",
        "-o",
        "ControlMaster=no",
        "-o",
        "ControlPath=none",
    ]
    for name in ("id_ed25519", "id_ecdsa", "id_rsa"):
        ours += ["-o", f"IdentityFile={home}/.ssh/{name}"]
    target = f"{user}@{host}" if user else host
    argv = [client, *ours, *opts, target, *command]
    rate = _link_rate()
    if rate > 0 and _bulk(command):
        return _paced(argv, rate)
    os.execv(client, argv)
    return 255  # not reached


def _bulk(command: list[str]) -> bool:
    """A copy leaving this node: rsync's receiving end or `docker load` on the peer."""
    words = " ".join(command)
    return "rsync" in words or ("docker" in words and "load" in words)


def _link_rate(key: str = "link_bytes_per_s") -> float:
    try:
        with open(demo_root() / "demo.json", encoding="utf-8") as f:
            return float(json.load(f).get(key) or 0)
    except (OSError, ValueError):
        return 0.0


def _paced(argv: list[str], rate: float) -> int:
    """Run ssh with what we send paced to this node's shared link (see demo/link.py)."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: proc.send_signal(s))
    node_dir = os.environ.get(NODE_ENV) or os.environ.get("HOME", "/tmp")

    def feed() -> None:
        try:
            link.pump(
                sys.stdin.fileno(), proc.stdin.fileno(), rate, Path(node_dir) / "link", _link_rate("stream_bytes_per_s")
            )
        except OSError:
            pass  # the peer went away: ssh says why
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
