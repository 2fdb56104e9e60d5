"""What the rendezvous check runs on a node: the look before (interfaces, addresses, image, free ports)
and the `docker run` of the check program with the plan's own container flags and env."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Iterable
from pathlib import Path

from . import check_program
from .check_program import IFNAME_VARS, MARK, iface_matches
from .verdict import classified
from .ipc import SECTION as IPC_SECTION, IpcLook, parse_ipc
from . import transit
from ..config.config import DockerConfig
from ..engines import host_ip_vars
from ..engines.common import Spot, Word, docker_flags, render
from ..nodes.facts import Memory
from ..nodes.probes import parse_meminfo
from ..config.secrets import MASK
from ..state.states import CheckKind as C
from ..state.labels import DEPLOYMENT as LABEL_DEPLOYMENT, PREFLIGHT as LABEL
from ..plan.plan import NodePlan
from ..remote.ssh import script

PREFIX = "sparktui-preflight-"
PORT_SPAN = 200  # how far above the dist port a free port is looked for
_HOST_IP_LINE = "HOST_IP_VARS: tuple = ()\n"


def program_text() -> str:
    """The check program as sent to a node: its host-IP variables are the registry's (it cannot import it there)."""
    text = Path(check_program.__file__).read_text(encoding="utf-8")
    if _HOST_IP_LINE not in text:  # the line moved: fail here, not with a check that ignores the variables
        raise RuntimeError(f"{check_program.__file__} lost its line {_HOST_IP_LINE.strip()!r}")
    return text.replace(_HOST_IP_LINE, f"HOST_IP_VARS: tuple = {host_ip_vars()!r}\n", 1)


_LOOK = """echo @@ip; ip -j addr 2>&1
echo @@image; docker image inspect --format {fmt} {image} 2>&1; echo "@@rc $?"
echo @@ib; if [ -e /dev/infiniband ]; then echo yes; else echo no; fi
echo @@tcp; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; true
echo @@mem; cat /proc/meminfo 2>/dev/null; true
echo @@user; docker image inspect --format {ufmt} {image} 2>/dev/null; true
echo @@ctrs; docker ps -a --no-trunc --filter {label} --format {jfmt} 2>&1; echo "@@rc $?"
echo @@stats; ids=$(docker ps -q --no-trunc --filter {label} --filter status=running 2>/dev/null)
if [ -n "$ids" ]; then docker stats --no-stream --no-trunc --format {sfmt} $ids 2>/dev/null; fi; true
"""


def look_command(image: str, root: str = "") -> str:
    """One round trip before anything starts: `ip -j addr`, the image (and the user it runs as),
    /dev/infiniband, listening ports, /proc/meminfo (free memory now, not at the last poll: a copy may
    have just filled the page cache), every container with sparktui's labels and what the running ones
    hold (`docker stats`), logind's IPC settings for the SSH user (ipc.py), and what a ring's transit needs
    (transit.py). root: where the system's
    files are read (a test's fake tree; "" on a node)."""
    return script(
        _LOOK + IPC_SECTION + transit.SECTION,
        fmt="{{.Id}}",
        image=image,
        ufmt="{{.Config.User}}",
        label=f"label={LABEL_DEPLOYMENT}",
        jfmt="{{json .}}",
        sfmt="{{.Name}} {{.MemUsage}}",
        root=root,
    )


@dataclass
class Look:
    """What a node showed before the check."""

    interfaces: dict[str, dict] = field(default_factory=dict)  # name -> {"addrs": [...], "up": bool}
    image_id: str | None = None
    image_error: str | None = None
    infiniband: bool = False
    listening: set[int] = field(default_factory=set)
    memory: Memory | None = None
    image_user: str | None = None  # the image's USER ("" or None: root)
    containers: list[str] | None = None  # `docker ps -a` JSON lines of sparktui's containers (None: docker failed)
    containers_error: str | None = None
    stats: list[str] = field(default_factory=list)  # `docker stats` lines: NAME USED / LIMIT
    ipc: IpcLook | None = None
    transit: transit.TransitLook | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def addresses(self) -> set[str]:
        return {a for i in self.interfaces.values() for a in i["addrs"]}


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("@@") and not line.startswith("@@rc"):
            cur = line[2:].strip()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return out


def _listening(lines: list[str]) -> set[int]:
    """Ports in LISTEN (state 0A) from /proc/net/tcp and tcp6."""
    ports = set()
    for line in lines:
        parts = line.split()
        if len(parts) > 3 and parts[3] == "0A" and ":" in parts[1]:
            try:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
            except ValueError:
                continue
    return ports


def parse_look(text: str, root: str = "") -> Look:
    sec = _sections(text)
    look = Look()
    try:
        links = json.loads("\n".join(sec.get("ip", [])) or "null")
    except ValueError:
        links = None
    if isinstance(links, list):
        for link in links:
            if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
                continue
            flags = [str(f).upper() for f in link.get("flags") or []]
            state = str(link.get("operstate") or "").upper()
            up = "NO-CARRIER" not in flags and (state == "UP" or (state in ("UNKNOWN", "") and "UP" in flags))
            addrs = [
                a["local"]
                for a in link.get("addr_info") or []
                if isinstance(a, dict) and a.get("family") in ("inet", "inet6") and a.get("local")
            ]
            look.interfaces[link["ifname"]] = {"addrs": addrs, "up": up}
    else:
        look.notes.append("`ip -j addr` gave no JSON: interfaces not checked before the run")
    text_img = "\n".join(ln for ln in sec.get("image", []) if not ln.startswith("@@rc")).strip()
    rc = next((ln.split()[1] for ln in text.splitlines() if ln.startswith("@@rc ")), "1")
    if rc == "0" and text_img.startswith("sha256:"):
        look.image_id = text_img.splitlines()[0]
    else:
        look.image_error = text_img or "docker image inspect failed"
    look.infiniband = "yes" in sec.get("ib", [])
    look.listening = _listening(sec.get("tcp", []))
    mem = parse_meminfo("\n".join(sec.get("mem", [])))
    look.memory = mem if mem.total_bytes and mem.free_bytes is not None else None
    user = [ln.strip() for ln in sec.get("user", []) if ln.strip()]
    look.image_user = user[0] if user else None
    if "ctrs" in sec:
        rc = next((ln.split()[1] for ln in sec["ctrs"] if ln.startswith("@@rc ")), "1")
        rows = [ln for ln in sec["ctrs"] if ln.strip() and not ln.startswith("@@rc")]
        if rc == "0":
            look.containers = rows
        else:
            look.containers_error = (rows[-1] if rows else "docker ps failed").strip()
    look.stats = [ln.strip() for ln in sec.get("stats", []) if ln.strip()]
    if "ipc" in sec:
        look.ipc = parse_ipc(sec["ipc"], root)
    look.transit = transit.parse(sec)
    return look


def judge_look(n: NodePlan, look: Look) -> tuple[C | None, str, list[str]]:
    """(kind, error, notes) for what the plan needs on this node; kind None when it may run."""
    notes = list(look.notes)
    if look.image_error:
        kind = classified(look.image_error)[0]
        if kind not in (C.IMAGE_MISSING, C.DOCKER):
            kind = C.DOCKER if "command not found" in look.image_error else C.IMAGE_MISSING
        return kind, look.image_error.splitlines()[-1], notes
    if not look.interfaces:
        return None, "", notes
    names = list(look.interfaces)
    if n.iface and n.iface not in look.interfaces:
        return C.INTERFACE_MISSING, f"no interface named {n.iface} on {n.name} (it has {', '.join(names)})", notes
    for var in IFNAME_VARS:
        spec = n.env.get(var)
        if spec and spec != MASK and not iface_matches(spec, names):
            return (
                C.INTERFACE_MISSING,
                f"no interface matches {var}={spec} on {n.name} (it has {', '.join(names)})",
                notes,
            )
    if n.ip and n.ip not in look.addresses:
        return C.ADDRESS_MISSING, f"{n.ip} is not an address of this node ({n.name})", notes
    for var in host_ip_vars():
        v = n.env.get(var)
        if v and v != MASK and v not in look.addresses:
            return C.ADDRESS_MISSING, f"{var} {v} is not an address of this node ({n.name})", notes
    if n.iface and not look.interfaces[n.iface]["up"]:
        notes.append(f"{n.iface} on {n.name} is down or has no carrier (cable unplugged?)")
    return None, "", notes


def free_port(listening: set[int], near: int, avoid: set[int]) -> int | None:
    """The first port above `near` nobody listens on (the engine's own dist port stays untouched)."""
    for p in range(near + 1, min(near + 1 + PORT_SPAN, 65536)):
        if p not in listening and p not in avoid:
            return p
    return None


def container_name(check_id: str, rank: int) -> str:
    return f"{PREFIX}{check_id}-r{rank}"


def check_command(
    docker: DockerConfig,
    image: str,
    n: NodePlan,
    infiniband: bool,
    *,
    check_id: str,
    addr: str,
    port: int,
    world: int,
    timeout: float,
    mode: str = "auto",
) -> str:
    """`docker run --rm -i` of the check program (fed on stdin) with the engine containers' flags and env.

    Masked values (secrets) are left out: the check needs none, and the plan only holds them masked.
    """
    env = {k: v for k, v in n.env.items() if v != MASK}
    spot = Spot(
        name=n.name, rank=n.rank, role=n.role, iface=n.iface, ip=n.ip, rdma=n.rdma, infiniband=infiniband, env=env
    )
    words: list[Word] = [
        "docker",
        "run",
        "--rm",
        "-i",
        "--name",
        container_name(check_id, n.rank),
        "--label",
        f"{LABEL}={check_id}",
    ]
    words += docker_flags(docker, spot)
    words += [
        image,
        "python3",
        "-",
        "--rank",
        str(n.rank),
        "--world",
        str(world),
        "--addr",
        addr,
        "--port",
        str(port),
        "--timeout",
        f"{timeout:g}",
        "--mode",
        mode,
    ]
    if n.ip:
        words += ["--bind", n.ip]
    if n.iface:
        words += ["--iface", n.iface]
    return render(words, "run")


PID = "SPARKTUI-PID "  # the first line of a held check: the process group that `docker run` leads on the node


def held_command(command: str) -> str:
    """`command` in a process group of its own whose id it prints first, with stderr on stdout.

    A `docker run` still waiting on the daemon (a large image on slow storage) has no container that
    `docker rm -f` could remove yet: the sweep kills this group instead, so nothing that was started
    keeps going on the node. setsid -w keeps the channel open until the command ends; without setsid
    the shell that sshd starts leads a session of its own already.
    """
    inner = 'echo "' + PID + '$$"; exec ' + command + " 2>&1"
    return script(
        "if command -v setsid >/dev/null 2>&1; then exec setsid -w sh -c {inner} 2>&1; else exec sh -c {inner} 2>&1; fi",
        inner=inner,
    )


def pid_from_line(line: str) -> int | None:
    if line.startswith(PID) and line[len(PID) :].strip().isdigit():
        return int(line[len(PID) :].strip())
    return None


def sweep_command(names: list[str], pids: Iterable[int] = ()) -> str:
    """Remove this check's containers whatever state they are in (no error when already gone), then
    kill what is left of the process groups of their `docker run` (pids from held_command) where known:
    a client still waiting for the daemon to start the container."""
    kills = "".join(f"; kill -KILL -- -{int(p)} 2>/dev/null || kill -KILL {int(p)} 2>/dev/null" for p in pids)
    return "docker rm -f " + " ".join(shlex.quote(x) for x in names) + " >/dev/null 2>&1" + kills + "; true"


def result_from_output(stdout: str) -> dict | None:
    """The check program's result line (the last one wins)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                data = json.loads(line[len(MARK) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None
