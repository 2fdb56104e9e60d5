"""What a node is, from one shell script's output: GPUs, memory, disk, interfaces, RDMA, Docker.

`probe_script()` builds one POSIX sh script (one round-trip per node); `parse_probe()` turns its
output into NodeFacts. No SSH here: every parser is pure and fed by real command output, and
none raises on garbage: a field it cannot read stays None and a note says why.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from ..state.labels import DEPLOYMENT as LABEL  # on every container sparktui starts
from .facts import Container, DockerInfo, Gpu, Interface, Memory, ModelDir, NodeFacts
from .probe_needs import docker_problem, parse_rsync_version, parse_runtimes, parse_toolkit

GPU_QUERY = "name,memory.total,memory.used,utilization.gpu"
SECTION_TIMEOUT = 10  # seconds each tool may take, so one stuck tool never hangs the probe
PROBE_TIMEOUT = 180.0  # a bound for the whole probe: every section stuck at once, plus slack
INCOMPLETE_MARKER = ".sparktui-incomplete"  # transfers.remote.MARKER: a copy into the model directory is unverified

# Sections are `@@sparktui:out NAME@@` stdout `@@sparktui:err NAME@@` stderr `@@sparktui:rc NAME N@@`.
# The newline printed before each closing marker is the script's, so stdout comes back byte-exact.
_SCRIPT = r"""LC_ALL=C; export LC_ALL
PATH=$PATH:/usr/sbin:/sbin:/usr/local/sbin
M=__MODEL__
case $M in "~") M=$HOME ;; "~/"*) M=$HOME/${M#"~/"} ;; esac
T=
# -k: a tool that ignores SIGTERM gets SIGKILL 2 s later (old busybox timeout lacks -k).
if timeout -k 2 1 true >/dev/null 2>&1; then T="timeout -k 2 __TIMEOUT__"
elif timeout 1 true >/dev/null 2>&1; then T="timeout __TIMEOUT__"; fi
# Every section runs at once, into its own files; they are printed in order once all have ended, so a
# slow tool (nvidia-smi, the docker CLI) costs its own time, not the sum of all of them.
# Without mktemp: a directory only this run creates (mkdir without -p fails on one that exists; $$
# alone is not unique where nodes share /tmp from PID namespaces of their own).
D=$(mktemp -d 2>/dev/null) || { i=0; until D=${TMPDIR:-/tmp}/sparktui-probe.$$.$i; mkdir -m 700 "$D" 2>/dev/null
  do i=$((i+1)); [ $i -lt 100 ] || exit 1; done; }
trap 'rm -rf "$D"' EXIT
trap 'exit 129' HUP INT TERM
sec() {
  n=$1; shift
  ( "$@" >"$D/$n.out" 2>"$D/$n.err"; echo $? >"$D/$n.rc" ) &
}
show() {
  for n in "$@"; do
    [ -f "$D/$n.rc" ] || continue
    printf '@@sparktui:out %s@@\n' "$n"
    cat "$D/$n.out"
    printf '\n@@sparktui:err %s@@\n' "$n"
    head -c 2000 "$D/$n.err" 2>/dev/null
    printf '\n@@sparktui:rc %s %s@@\n' "$n" "$(cat "$D/$n.rc")"
  done
}
dockers() {
  ( $T docker version --format '{{.Server.Version}}' >"$D/docker-version.out" 2>"$D/docker-version.err"
    echo $? >"$D/docker-version.rc" )
  [ "$(cat "$D/docker-version.rc")" = 0 ] || return 0
  sec docker-images $T docker images --format '{{json .}}'
  sec docker-ids $T docker image ls --no-trunc --format '{{.Repository}}:{{.Tag}} {{.ID}}'
  sec docker-ps $T docker ps -a --filter label=__LABEL__ --format '{{json .}}'
  sec docker-runtimes $T docker info --format '{{json .Runtimes}}'
  wait
}
nearest() {
  p=$M
  while [ ! -e "$p" ]; do
    case $p in */*) p=${p%/*}; [ -n "$p" ] || p=/ ;; *) p=. ;; esac
  done
  $T df -PB1 "$p"
}
modeldir() {
  printf 'path %s\n' "$M"
  if [ -d "$M" ]; then echo dir; elif [ -e "$M" ]; then echo notdir; else echo missing; fi
  # a copy into it began and is not verified yet (see transfers/remote.py MARKER)
  if [ -f "$M/__MARKER__" ]; then printf 'incomplete %s\n' "$(head -n 1 "$M/__MARKER__" | head -c 300)"; fi
}
ibsys() {
  for d in /sys/class/infiniband/*; do
    [ -d "$d" ] || continue
    for n in "$d"/device/net/*; do
      [ -e "$n" ] || continue
      printf '%s %s %s\n' "${d##*/}" "${n##*/}" "$(cat "$d/ports/1/state" 2>/dev/null)"
    done
  done
}
# Each RDMA device's PCI address (pairs a port's halves) and its first GIDs: type and address, so the
# RoCEv2 one holding an IPv4 address can be named (NCCL_IB_GID_INDEX). A GID table has up to 256
# entries, unused ones unreadable: the first 16 hold the addresses of any sane setup.
ibgid() {
  for d in /sys/class/infiniband/*; do
    [ -d "$d" ] || continue
    p=$(readlink -f "$d/device" 2>/dev/null) && printf 'pci %s %s\n' "${d##*/}" "${p##*/}"
    for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
      t=$(cat "$d/ports/1/gid_attrs/types/$i" 2>/dev/null) || continue
      g=$(cat "$d/ports/1/gids/$i" 2>/dev/null) || continue
      printf 'gid %s %s %s %s\n' "${d##*/}" "$i" "$g" "$t"
    done
  done
}
speeds() {
  for d in /sys/class/net/*; do
    [ -e "$d" ] || continue
    s=$(cat "$d/speed" 2>/dev/null) || s=
    printf '%s %s\n' "${d##*/}" "${s:-?}"
  done
}
toolkit() {
  for t in nvidia-container-runtime-hook nvidia-ctk; do
    p=$(command -v "$t" 2>/dev/null) && printf 'tool %s\n' "$p"
  done
  for f in /etc/cdi/* /var/run/cdi/*; do
    [ -f "$f" ] && grep -qs 'nvidia.com/gpu' "$f" && printf 'cdi %s\n' "$f"
  done
  return 0
}
sec nvidia-smi $T nvidia-smi --query-gpu=__QUERY__ --format=csv,noheader,nounits
sec meminfo cat /proc/meminfo
sec df nearest
sec model modeldir
if [ -d "$M" ]; then
  sec du $T du -sbL "$M"
  sec files $T sh -c 'find -L "$1" -type f ! -name __MARKER__ | wc -l' sh "$M"
  # with -L, -type l is a link that points nowhere: a file the checkpoint lacks
  sec broken $T sh -c 'find -L "$1" -type l | head -n 4' sh "$M"
fi
dockers &
sec ip $T ip -j addr
if command -v ibdev2netdev >/dev/null 2>&1; then sec ibdev2netdev $T ibdev2netdev; fi
sec ib-sys ibsys
sec ib-gid ibgid
sec infiniband test -d /dev/infiniband
sec speed speeds
sec user id -un
sec rsync $T rsync --version
sec gpu-toolkit toolkit
wait
show nvidia-smi meminfo df model du files broken docker-version docker-images docker-ids docker-ps docker-runtimes \
  ip ibdev2netdev ib-sys ib-gid infiniband speed user rsync gpu-toolkit
printf '@@sparktui:done@@\n'
"""


def probe_script(model_path: str) -> str:
    """The probe as one POSIX sh script; the model path is shell-quoted into it."""
    return (
        _SCRIPT.replace("__MODEL__", shlex.quote(model_path))
        .replace("__TIMEOUT__", str(SECTION_TIMEOUT))
        .replace("__QUERY__", GPU_QUERY)
        .replace("__LABEL__", LABEL)
        .replace("__MARKER__", INCOMPLETE_MARKER)
    )


def probe_command(model_path: str) -> str:
    """The probe as one command line for Node.run(): `sh -c SCRIPT`, whatever the login shell is."""
    return "sh -c " + shlex.quote(probe_script(model_path))


@dataclass
class Section:
    """One tool's output in the probe: stdout, stderr (first 2000 bytes) and exit code."""

    out: str
    err: str
    rc: int


_SECTION = re.compile(
    r"@@sparktui:out (?P<n>\S+)@@\n(?P<out>.*?)\n@@sparktui:err (?P=n)@@\n(?P<err>.*?)\n"
    r"@@sparktui:rc (?P=n) (?P<rc>-?\d{1,9})@@",  # an exit status; a longer number is not one
    re.S,
)


def split_sections(text: str) -> dict[str, Section]:
    # A PTY turns \n into \r\n; undo it so markers match either way.
    text = text.replace("\r\n", "\n")
    return {m["n"]: Section(m["out"], m["err"], int(m["rc"])) for m in _SECTION.finditer(text)}


def _why(name: str, sec: Section) -> str:
    """A one-line reason a tool failed, for notes."""
    if sec.rc in (124, 137):  # timeout's TERM, then KILL for a tool that ignored it
        return f"{name}: no answer within {SECTION_TIMEOUT} s"
    if sec.rc == 127:  # the shell's (or timeout's) "command not found"
        return f"{name}: not installed (exit 127)"
    first = next((ln.strip() for ln in sec.err.splitlines() if ln.strip()), "")
    return f"{name}: {first or 'failed'} (exit {sec.rc})"


# --- nvidia-smi -------------------------------------------------------------------------------

_UNKNOWN = {"n/a", "not supported", ""}


def _num(field: str) -> float | None:
    """A number from nvidia-smi, or None for [N/A] / [Not Supported] and the like."""
    f = field.strip()
    # Brackets mark a value the driver cannot give ([N/A], [Not Supported], [GPU requires reset]).
    if f.lower() in _UNKNOWN or f.startswith("[") or f == "ERR!":
        return None
    try:
        return float(f)
    except ValueError:
        raise ValueError(f) from None


def parse_nvidia_smi(text: str, notes: list[str] | None = None) -> Gpu:
    """`nvidia-smi --query-gpu=name,memory.total,memory.used,utilization.gpu --format=csv,noheader,nounits`.

    One row per GPU, memory in MiB. GB10 prints [N/A] for memory: it shares system memory.
    """
    notes = notes if notes is not None else []
    names: list[str] = []
    totals: list[float | None] = []
    utils: list[float | None] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.rsplit(",", 3)  # the name comes first and is the only field that could hold a comma
        try:
            if len(parts) != 4 or not parts[0].strip():
                raise ValueError(line)
            total, _used, util = (_num(p) for p in parts[1:])
        except ValueError:
            notes.append(f"nvidia-smi: unreadable line {line.strip()[:120]!r}")
            continue
        names.append(parts[0].strip())
        totals.append(total)
        utils.append(util)
    if not names:
        return Gpu()
    if len(set(names)) > 1:
        notes.append(f"nvidia-smi: mixed GPUs {', '.join(sorted(set(names)))}; sizing uses the smallest")
    known = [t for t in totals if t is not None]
    gpu = Gpu(name=names[0], count=len(names), utilization=utils[0])
    if known:
        gpu.memory_total_bytes = int(min(known) * 1024 * 1024)
    gpu.unified = not known or any("GB10" in n for n in names)
    return gpu


# --- /proc/meminfo, df, du --------------------------------------------------------------------


def parse_meminfo(text: str, notes: list[str] | None = None) -> Memory:
    """/proc/meminfo: total = MemTotal, available = MemAvailable, free = MemFree, cached = Cached +
    Buffers (kB -> bytes)."""
    notes = notes if notes is not None else []
    kb: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s+kB)?\s*$", line)
        if m:
            kb[m[1]] = int(m[2])
    mem = Memory()
    if "MemTotal" in kb:
        mem.total_bytes = kb["MemTotal"] * 1024
    else:
        notes.append("meminfo: no MemTotal")
    if "MemFree" in kb:
        mem.free_bytes = kb["MemFree"] * 1024
    if "Cached" in kb:
        mem.cached_bytes = (kb["Cached"] + kb.get("Buffers", 0)) * 1024
    if "MemAvailable" in kb:
        mem.available_bytes = kb["MemAvailable"] * 1024
    elif {"MemFree", "Cached"} <= kb.keys():
        # Kernels before 3.14 lack MemAvailable; free + page cache is the usual stand-in.
        mem.available_bytes = (kb["MemFree"] + kb["Cached"] + kb.get("Buffers", 0)) * 1024
    return mem


def parse_df(text: str, notes: list[str] | None = None) -> int | None:
    """`df -PB1 PATH`: the Available column of the last data line, in bytes."""
    notes = notes if notes is not None else []
    for line in reversed(text.splitlines()):
        fields = line.split()
        if len(fields) >= 6 and fields[3].isdigit():
            return int(fields[3])
    notes.append("df: no free space figure")
    return None


def parse_du(text: str) -> int | None:
    """`du -sb PATH`: the byte count before the tab."""
    m = re.match(r"\s*(\d+)\s", text + "\n")
    return int(m[1]) if m else None


def parse_count(text: str) -> int | None:
    t = text.strip()
    return int(t) if t.isdigit() else None


# --- interfaces and RDMA ----------------------------------------------------------------------


def _is_up(link: dict) -> bool:
    state = str(link.get("operstate") or "").upper()
    flags = [str(f).upper() for f in link.get("flags") or []]
    if state == "UP":
        return True
    if state in ("UNKNOWN", ""):
        # Some drivers and veths never report operstate: trust the flags unless the carrier is gone.
        return ("UP" in flags or "LOWER_UP" in flags) and "NO-CARRIER" not in flags
    return False


def link_state(link: dict) -> str:
    """Why a link is not up, in words ("" when it is): set down, or up without a carrier."""
    if _is_up(link):
        return ""
    flags = [str(f).upper() for f in link.get("flags") or []]
    if "UP" not in flags:
        return "link down"
    return "no carrier"


def parse_ip_addr(text: str, notes: list[str] | None = None) -> list[Interface]:
    """`ip -j addr`: every interface but loopback, with IPv4 CIDRs and whether it is up."""
    notes = notes if notes is not None else []
    try:
        links = json.loads(text)
    except ValueError:
        notes.append("ip -j addr: not JSON (iproute2 too old?)")
        return []
    if not isinstance(links, list):
        notes.append("ip -j addr: unexpected shape")
        return []
    out: list[Interface] = []
    for link in links:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            continue
        if link["ifname"] == "lo" or link.get("link_type") == "loopback":
            continue
        ipv4 = []
        for a in link.get("addr_info") or []:
            if (
                isinstance(a, dict)
                and a.get("family") == "inet"
                and a.get("local")
                and isinstance(a.get("prefixlen"), int)
            ):
                ipv4.append(f"{a['local']}/{a['prefixlen']}")
        mtu = link.get("mtu")
        out.append(
            Interface(
                name=link["ifname"],
                ipv4=ipv4,
                up=_is_up(link),
                state=link_state(link),
                mtu=mtu if isinstance(mtu, int) and not isinstance(mtu, bool) and mtu > 0 else None,
                link_type=str(link.get("link_type") or ""),
            )
        )
    return out


_IBDEV = re.compile(r"^\s*(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)\s+\((\w+)\)")


def parse_ibdev2netdev(text: str, notes: list[str] | None = None) -> dict[str, str]:
    """`ibdev2netdev`: netdev -> RDMA device, from lines like `rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)`."""
    notes = notes if notes is not None else []
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _IBDEV.match(line)
        if m:
            out.setdefault(m[3], m[1])
        elif line.strip():
            notes.append(f"ibdev2netdev: unreadable line {line.strip()[:120]!r}")
    return out


def parse_ib_sysfs(text: str) -> dict[str, str]:
    """The probe's walk of /sys/class/infiniband (`DEV NETDEV STATE`): netdev -> RDMA device."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2:
            out.setdefault(parts[1], parts[0])
    return out


# An IPv4-mapped GID (::ffff:a.b.c.d), as sysfs prints it: the RoCEv2 entry NCCL needs for IPv4.
_V4_GID = re.compile(r"^0000:0000:0000:0000:0000:ffff:[0-9a-f]{4}:[0-9a-f]{4}$")
_PCI = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def parse_ib_gid(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """The probe's `ib-gid` lines: (RDMA device -> PCI address, RDMA device -> RoCEv2 IPv4 GID index).

    `pci DEV ADDR` and `gid DEV INDEX GID TYPE...`; the lowest index whose type is "RoCE v2" and whose
    GID is IPv4-mapped wins (the one NVIDIA's Spark threads set as NCCL_IB_GID_INDEX, usually 3)."""
    pci: dict[str, str] = {}
    gid: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split(None, 4)
        if len(parts) == 3 and parts[0] == "pci" and _PCI.match(parts[2].lower()):
            pci[parts[1]] = parts[2].lower()
        elif (
            len(parts) == 5
            and parts[0] == "gid"
            and parts[2].isdigit()
            and len(parts[2]) < 4
            and _V4_GID.match(parts[3].lower())
            and parts[4].strip().lower() == "roce v2"
        ):
            gid[parts[1]] = min(gid.get(parts[1], 1 << 16), int(parts[2]))
    return pci, gid


def parse_speeds(text: str) -> dict[str, int]:
    """`IF SPEED` lines from /sys/class/net/IF/speed in Mb/s; unknown (-1, ?, 2^32-1) left out."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and 0 < int(parts[1]) < 0xFFFFFFFF:
            out[parts[0]] = int(parts[1])
    return out


# --- docker -----------------------------------------------------------------------------------


def parse_docker_version(text: str, notes: list[str] | None = None) -> str | None:
    """`docker version --format '{{.Server.Version}}'`: the server's version, e.g. 28.3.3."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if re.fullmatch(r"\d+(\.\d+)*[\w.+~-]*", first):
        return first
    if first and notes is not None:
        notes.append(f"docker version: unreadable {first[:120]!r}")
    return None


def _json_lines(text: str, what: str, notes: list[str]) -> list[dict]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            notes.append(f"{what}: unreadable line {line.strip()[:120]!r}")
    return rows


def parse_image_ids(text: str) -> dict[str, str]:
    """`docker image ls --no-trunc --format '{{.Repository}}:{{.Tag}} {{.ID}}'`: repo:tag -> full ID."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and "<none>" not in parts[0]:
            out[parts[0]] = parts[1]
    return out


def parse_docker_images(text: str, notes: list[str] | None = None) -> dict[str, str]:
    """`docker images --format '{{json .}}'`: repo:tag -> (short) ID; untagged images left out."""
    notes = notes if notes is not None else []
    out: dict[str, str] = {}
    for row in _json_lines(text, "docker images", notes):
        repo, tag, iid = row.get("Repository"), row.get("Tag"), row.get("ID")
        if isinstance(repo, str) and isinstance(tag, str) and isinstance(iid, str) and "<none>" not in (repo, tag):
            out[f"{repo}:{tag}"] = iid
    return out


def parse_labels(text: str) -> dict[str, str]:
    """Docker's comma-joined `k=v,k=v` labels; a piece without `=` belongs to the value before it."""
    out: dict[str, str] = {}
    last = None
    for piece in text.split(",") if text else []:
        if "=" in piece:
            k, v = piece.split("=", 1)
            out[k] = v
            last = k
        elif last is not None:
            out[last] += "," + piece
    return out


_STATUS_STATE = (
    ("Up", "running"),
    ("Exited", "exited"),
    ("Created", "created"),
    ("Restarting", "restarting"),
    ("Removal", "removing"),
    ("Dead", "dead"),
)


def _state_from_status(status: str) -> str:
    if "(Paused)" in status:
        return "paused"
    return next((state for prefix, state in _STATUS_STATE if status.startswith(prefix)), "unknown")


def parse_docker_ps(text: str, notes: list[str] | None = None) -> list[Container]:
    """`docker ps -a --format '{{json .}}'`: one JSON object a line."""
    notes = notes if notes is not None else []
    out = []
    for row in _json_lines(text, "docker ps", notes):
        cid = row.get("ID")
        if not isinstance(cid, str):
            notes.append("docker ps: a container without ID")
            continue
        status = str(row.get("Status") or "")
        labels = row.get("Labels")
        out.append(
            Container(
                id=cid,
                name=str(row.get("Names") or "").split(",")[0],
                image=str(row.get("Image") or ""),
                # Old engines omit State; their Status text still says it.
                state=str(row.get("State") or _state_from_status(status)),
                status=status,
                labels=parse_labels(labels) if isinstance(labels, str) else {},
            )
        )
    return out


# --- the whole probe --------------------------------------------------------------------------


def _model(secs: dict[str, Section], notes: list[str]) -> ModelDir | None:
    sec = secs.get("model")
    if sec is None:
        return None
    lines = sec.out.splitlines()
    path = lines[0][5:] if lines and lines[0].startswith("path ") else ""
    kind = lines[1].strip() if len(lines) > 1 else ""
    mark = next((ln for ln in lines[2:] if ln.startswith("incomplete")), None)
    model = ModelDir(path=path, present=kind == "dir" and mark is None)
    if kind == "dir" and mark is not None:
        # never "present": what is there may be cut short
        model.incomplete = mark[len("incomplete") :].strip() or "a copy into it was not verified"
    if kind == "notdir":
        notes.append(f"model path {path} exists but is not a directory")
    if kind == "dir":
        du, files = secs.get("du"), secs.get("files")
        if du is not None:
            model.bytes = parse_du(du.out)
            if du.rc != 0:
                notes.append(_why("du", du) + ("" if model.bytes is None else "; size may be short"))
        if files is not None and files.rc == 0:
            model.files = parse_count(files.out)
        elif files is not None:
            notes.append(_why("find", files))
        broken = [ln for ln in (secs["broken"].out.splitlines() if "broken" in secs else []) if ln.strip()]
        if broken and model.incomplete is None:
            shown = ", ".join(ln[len(path) :].lstrip("/") or ln for ln in broken[:3])
            model.present = False
            model.incomplete = f"links that point nowhere: {shown}" + (" and more" if len(broken) > 3 else "")
    return model


def parse_probe(name: str, host: str, text: str) -> NodeFacts:
    """NodeFacts from the output of probe_script(); never raises on bad output."""
    facts = NodeFacts(name=name, host=host, reachable=True)
    notes = facts.notes
    secs = split_sections(text)
    if not secs:
        facts.error = "probe output unreadable: " + (text.strip().splitlines() or ["(empty)"])[0][:200]
        return facts
    if "@@sparktui:done@@" not in text:
        notes.append("probe output cut short; later facts missing")

    def ok(key: str, label: str | None = None, quiet_rc: tuple[int, ...] = ()) -> Section | None:
        sec = secs.get(key)
        if sec is not None and sec.rc != 0 and sec.rc not in quiet_rc:
            notes.append(_why(label or key, sec))
        return sec

    def read(label: str, default, parse, *args):
        """One tool's facts; output no parser foresaw (a 5000-digit number) costs that tool only."""
        try:
            return parse(*args)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError) as e:
            notes.append(f"{label}: unreadable output ({type(e).__name__})")
            return default

    if (sec := ok("nvidia-smi")) is not None:
        facts.gpu = read("nvidia-smi", Gpu(), parse_nvidia_smi, sec.out, notes)
    if (sec := ok("meminfo")) is not None:
        facts.memory = read("meminfo", Memory(), parse_meminfo, sec.out, notes)
    if (sec := ok("df")) is not None:
        facts.disk_free_bytes = read("df", None, parse_df, sec.out, notes)
    facts.model = read("model", None, _model, secs, notes)

    docker = DockerInfo()
    if (sec := ok("docker-version", "docker")) is not None:
        docker.version = read("docker", None, parse_docker_version, sec.out, notes)
    if (sec := ok("docker-images", "docker images")) is not None:
        docker.images = read("docker images", {}, parse_docker_images, sec.out, notes)
    if (sec := ok("docker-ids", "docker image ls")) is not None:
        # Full IDs win over the short ones of the JSON listing.
        docker.images.update(read("docker image ls", {}, parse_image_ids, sec.out))
    if (sec := ok("docker-ps", "docker ps")) is not None:
        facts.containers = read("docker ps", [], parse_docker_ps, sec.out, notes)
    if (sec := ok("docker-runtimes", "docker info")) is not None:
        docker.runtimes = read("docker info", [], parse_runtimes, sec.out)
    if (sec := secs.get("docker-version")) is not None and sec.rc != 0:
        docker.problem = docker_problem(sec.err) or _why("docker", sec)
    facts.docker = docker

    if (sec := ok("ip", "ip -j addr")) is not None:
        facts.interfaces = read("ip -j addr", [], parse_ip_addr, sec.out, notes)
    rdma: dict[str, str] = {}
    if (sec := secs.get("ib-sys")) is not None:
        rdma.update(read("ib-sys", {}, parse_ib_sysfs, sec.out))
    if (sec := ok("ibdev2netdev")) is not None:
        rdma.update(read("ibdev2netdev", {}, parse_ibdev2netdev, sec.out, notes))
    speeds = read("speed", {}, parse_speeds, secs["speed"].out) if "speed" in secs else {}
    pci, gids = read("ib-gid", ({}, {}), parse_ib_gid, secs["ib-gid"].out) if "ib-gid" in secs else ({}, {})
    for iface in facts.interfaces:
        iface.rdma = rdma.get(iface.name)
        iface.speed_mbps = speeds.get(iface.name)
        if iface.rdma:
            iface.pci, iface.gid_index = pci.get(iface.rdma), gids.get(iface.rdma)
    if (sec := secs.get("infiniband")) is not None:
        facts.infiniband = sec.rc == 0
    if (sec := secs.get("user")) is not None and sec.rc == 0:
        facts.user = sec.out.strip() or None
    if (sec := secs.get("rsync")) is not None:
        facts.rsync = read("rsync", None, parse_rsync_version, sec.out) if sec.rc == 0 else None
    if (sec := secs.get("gpu-toolkit")) is not None:
        facts.gpu_toolkit, facts.cdi_specs = read("gpu-toolkit", ([], []), parse_toolkit, sec.out)
        facts.tools_probed = True
    return facts
