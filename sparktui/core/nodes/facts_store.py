"""Node facts kept on this machine and read from files: planning without the nodes.

Every probe that reaches a node keeps what it saw, with the time, in the state directory (one file
per cluster; a node that does not answer keeps its last good facts). `plan --offline` plans from
those, `plan --facts FILE` from a file such as a saved `check --json`. Every field read back is
checked for its type: a bad file is one line naming the file and the field, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .facts import Container, DockerInfo, Gpu, Interface, Memory, ModelDir, NodeFacts
from ..plan.image import ImageInfo

VERSION = 1
MAX_FILE = 64 << 20  # a check --json of 32 nodes with every container is well under 1 MiB


TAKEN_AT = (0.0, 1e11)  # unix times a facts file can hold (time.gmtime refuses far beyond)


class FactsFileError(Exception):
    """A facts file that cannot be used; str() is one line naming the file, the field and the way out."""


@dataclass
class Saved:
    """Facts for the config's nodes and when each was taken (None: unknown)."""

    facts: dict[str, NodeFacts]
    taken: dict[str, float | None] = field(default_factory=dict)
    source: str = ""  # where they came from, in words

    def when(self, now: float | None = None) -> str:
        """`spark1 at 2026-12-02 01:00 UTC (3 h ago), spark2 never`: what a plan from these says first."""
        now = time.time() if now is None else now
        parts = []
        for name, f in self.facts.items():
            t = self.taken.get(name)
            if not f.reachable:
                parts.append(f"{name} never seen reachable")
            elif t is None:
                parts.append(f"{name} at an unknown time")
            else:
                parts.append(f"{name} at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t))} ({_ago(now - t)})")
        return ", ".join(parts)


def _ago(s: float) -> str:
    if s < 0:
        return "in the future: check this machine's clock"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:.0f} {unit} ago"
    return "just now"


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "sparktui" / "facts"


def store_path(cluster: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in cluster).lstrip(".") or "default"
    return state_dir() / f"{safe}.json"


# ---- writing ------------------------------------------------------------------------------------


def remember(
    cluster: str, hosts: dict[str, str], facts: dict[str, NodeFacts], now: float | None = None, path: Path | None = None
) -> str | None:
    """Keep the facts of every node that answered (the others keep their last good ones); returns why
    they could not be kept, or None. Never raises: a probe must not fail on its cache."""
    path = path or store_path(cluster)
    now = time.time() if now is None else now
    try:
        try:
            old = _read_store(path, hosts)
        except FactsFileError:
            old = {}  # unreadable: replaced by what this probe saw
        nodes = {
            name: {"taken_at": t, "host": hosts.get(name, f.host), "facts": f.to_json()}
            for name, (f, t) in old.items()
            if f.reachable
        }
        for name, f in facts.items():
            if f.reachable:
                nodes[name] = {"taken_at": now, "host": f.host, "facts": f.to_json()}
        doc = {"version": VERSION, "cluster": cluster, "nodes": nodes}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # addresses and users: not for others
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(doc, allow_nan=False))  # whole before the first byte is written
            os.replace(tmp, path)  # a reader never sees half a file
        except BaseException:  # a full disk, a NaN, Ctrl-C: no half-written temp file left behind
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return None
    except (OSError, ValueError, TypeError) as e:
        return f"could not keep the node facts in {path} for `plan --offline`: {e}"


# ---- reading ------------------------------------------------------------------------------------


def load_last(cluster: str, node_names: list[str], hosts: dict[str, str], path: Path | None = None) -> Saved:
    """The last probe's facts for these nodes; FactsFileError when there are none or the file is bad."""
    path = path or store_path(cluster)
    if not path.exists():
        raise FactsFileError(
            f"no facts kept for cluster {cluster} yet ({path}): run `sparktui check` once while "
            f"the nodes are reachable, or plan from a file with --facts FILE"
        )
    return _pick(
        _read_store(path, hosts),
        node_names,
        hosts,
        f"the facts kept from the last probe ({path})",
        "no facts kept for {name}: it never answered a probe",
    )


def load_file(path: str | Path, node_names: list[str], hosts: dict[str, str]) -> Saved:
    """Facts from a file: a saved `check --json` or `status --json`, or a file this module wrote."""
    p = Path(path)
    doc = _load_json(p)
    if isinstance(doc, dict) and isinstance(doc.get("nodes"), dict):  # this module's own file
        found = _read_store(p, hosts, doc)
    elif isinstance(doc, dict) and isinstance(doc.get("nodes"), list):  # check --json / status --json
        try:
            mtime: float | None = p.stat().st_mtime
        except OSError:
            mtime = None
        found = {}
        for i, item in enumerate(doc["nodes"]):
            f = node_from_json(item, f"nodes[{i}]", p)
            found[f.name] = (f, mtime)
    else:
        raise FactsFileError(
            f"{p}: not a facts file: expected the output of `sparktui check --json` "
            f"(an object with a list under 'nodes')"
        )
    return _pick(found, node_names, hosts, f"{p}", f"{p} has no facts for {{name}}")


def _pick(
    found: dict[str, tuple[NodeFacts, float | None]],
    node_names: list[str],
    hosts: dict[str, str],
    source: str,
    missing: str,
) -> Saved:
    """The config's nodes in its order; a node the facts lack is unreachable, with `missing` saying why."""
    facts: dict[str, NodeFacts] = {}
    taken: dict[str, float | None] = {}
    for name in node_names:
        if name in found:
            facts[name], taken[name] = found[name]
        else:
            facts[name] = NodeFacts(
                name=name, host=hosts.get(name, ""), reachable=False, error=missing.replace("{name}", name)
            )  # a path may hold braces
            taken[name] = None
    return Saved(facts, taken, source)


def _load_json(p: Path) -> Any:
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_FILE + 1)
    except IsADirectoryError:
        raise FactsFileError(f"{p}: is a directory, not a facts file") from None
    except OSError as e:
        raise FactsFileError(f"{p}: cannot read it ({e.strerror or e})") from None
    if len(raw) > MAX_FILE:
        raise FactsFileError(f"{p}: larger than {MAX_FILE >> 20} MiB: not a facts file")
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise FactsFileError(
            f"{p}: not valid JSON ({str(e)[:120]}); save `sparktui check --json` output there, or delete it"
        ) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _read_store(path: Path, hosts: dict[str, str], doc: Any = None) -> dict[str, tuple[NodeFacts, float | None]]:
    """name -> (facts, when) from this module's file; facts taken from another host than the config's
    now names are left out (the node was moved: they say nothing about it)."""
    if doc is None:
        doc = _load_json(path)
    fix = f"delete {path} and run `sparktui check` to write it again"
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), dict):
        raise FactsFileError(f"{path}: not a facts file (no 'nodes' object); {fix}")
    if doc.get("version") != VERSION:
        raise FactsFileError(f"{path}: facts file version {doc.get('version')!r}, this sparktui reads {VERSION}; {fix}")
    out: dict[str, tuple[NodeFacts, float | None]] = {}
    for name, entry in doc["nodes"].items():
        where = f"nodes.{name}"
        if not isinstance(entry, dict):
            raise FactsFileError(f"{path}: {where}: expected an object; {fix}")
        try:
            taken = _num(entry.get("taken_at"), f"{where}.taken_at", path)
            if taken is not None and not TAKEN_AT[0] <= taken <= TAKEN_AT[1]:
                taken = None  # a clock far off or a hand edit: said as "an unknown time", never a crash
            host = _str(entry.get("host"), f"{where}.host", path)
            f = node_from_json(entry.get("facts"), f"{where}.facts", path)
        except FactsFileError as e:
            raise FactsFileError(f"{e}; {fix}") from None
        if f.name != name:
            raise FactsFileError(f"{path}: {where}.facts.name is {f.name!r}, not {name!r}; {fix}")
        if name in hosts and host is not None and host != hosts[name]:
            continue
        out[name] = (f, taken)
    return out


# ---- one node, checked field by field -----------------------------------------------------------


class _Reader:
    def __init__(self, d: Any, where: str, path: Path):
        if not isinstance(d, dict):
            raise FactsFileError(f"{path}: {where}: expected an object, got {_kind(d)}")
        self.d, self.where, self.path = d, where, path

    def at(self, key: str) -> str:
        return f"{self.where}.{key}"

    def str(self, key: str, default: str | None = None) -> str | None:
        v = _str(self.d.get(key), self.at(key), self.path)
        return default if v is None else v

    def int(self, key: str, default: int | None = None) -> int | None:
        v = self.d.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise FactsFileError(f"{self.path}: {self.at(key)}: expected a whole number ≥ 0, got {_kind(v)}")
        return v

    def num(self, key: str) -> float | None:
        return _num(self.d.get(key), self.at(key), self.path)

    def bool(self, key: str, default: bool = False) -> bool:
        v = self.d.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise FactsFileError(f"{self.path}: {self.at(key)}: expected true or false, got {_kind(v)}")
        return v

    def strs(self, key: str) -> list[str]:
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise FactsFileError(f"{self.path}: {self.at(key)}: expected a list of strings, got {_kind(v)}")
        return list(v)

    def map(self, key: str, none_ok: bool = False) -> dict:
        v = self.d.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict) or not all(
            isinstance(k, str) and (isinstance(x, str) or (none_ok and x is None)) for k, x in v.items()
        ):
            raise FactsFileError(f"{self.path}: {self.at(key)}: expected an object of strings, got {_kind(v)}")
        return dict(v)

    def list(self, key: str) -> list:
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise FactsFileError(f"{self.path}: {self.at(key)}: expected a list, got {_kind(v)}")
        return v


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    text = json.dumps(v)[:40] if isinstance(v, (int, float, str, bool)) else type(v).__name__
    return {"list": "a list", "dict": "an object"}.get(text, text)


def _str(v: Any, where: str, path: Path) -> str | None:
    if v is not None and not isinstance(v, str):
        raise FactsFileError(f"{path}: {where}: expected a string, got {_kind(v)}")
    return v


def _num(v: Any, where: str, path: Path) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise FactsFileError(f"{path}: {where}: expected a number, got {_kind(v)}")
    return float(v)


def node_from_json(d: Any, where: str, path: Path) -> NodeFacts:
    """NodeFacts from NodeFacts.to_json()'s shape; unknown keys are ignored, known ones must have their type."""
    r = _Reader(d, where, path)
    name = r.str("name")
    if not name:
        raise FactsFileError(f"{path}: {where}.name: expected the node's name")
    f = NodeFacts(name=name, host=r.str("host", "") or "", reachable=r.bool("reachable"), error=r.str("error"))
    if d.get("gpu") is not None:
        g = _Reader(d["gpu"], r.at("gpu"), path)
        f.gpu = Gpu(
            name=g.str("name"),
            count=g.int("count", 0) or 0,
            memory_total_bytes=g.int("memory_total_bytes"),
            utilization=g.num("utilization"),
            unified=g.bool("unified"),
        )
    if d.get("memory") is not None:
        m = _Reader(d["memory"], r.at("memory"), path)
        f.memory = Memory(m.int("total_bytes"), m.int("available_bytes"), m.int("free_bytes"), m.int("cached_bytes"))
        if not f.gpu.unified and f.gpu.count and f.gpu.memory_total_bytes is None and f.memory.total_bytes:
            f.gpu.unified = True  # an older check --json lacks the flag: a GPU without memory of its own is GB10's
    f.disk_free_bytes = r.int("disk_free_bytes")
    for i, item in enumerate(r.list("interfaces")):
        x = _Reader(item, f"{r.at('interfaces')}[{i}]", path)
        f.interfaces.append(
            Interface(
                name=x.str("name") or "",
                ipv4=x.strs("ipv4"),
                up=x.bool("up"),
                rdma=x.str("rdma"),
                speed_mbps=x.int("speed_mbps"),
                state=x.str("state", "") or "",
                mtu=x.int("mtu"),
                link_type=x.str("link_type", "") or "",
                pci=x.str("pci"),
                gid_index=x.int("gid_index"),
            )
        )
    if d.get("docker") is not None:
        k = _Reader(d["docker"], r.at("docker"), path)
        f.docker = DockerInfo(
            version=k.str("version"), images=k.map("images"), runtimes=k.strs("runtimes"), problem=k.str("problem")
        )
    for i, item in enumerate(r.list("containers")):
        c = _Reader(item, f"{r.at('containers')}[{i}]", path)
        f.containers.append(
            Container(
                c.str("id", "") or "",
                c.str("name", "") or "",
                c.str("image", "") or "",
                c.str("state", "") or "",
                c.str("status", "") or "",
                c.map("labels"),
            )
        )
    if d.get("model") is not None:
        m = _Reader(d["model"], r.at("model"), path)
        f.model = ModelDir(
            path=m.str("path", "") or "",
            present=m.bool("present"),
            bytes=m.int("bytes"),
            files=m.int("files"),
            incomplete=m.str("incomplete"),
        )
    f.infiniband = r.bool("infiniband")
    f.user = r.str("user")
    f.rsync = r.str("rsync")
    f.gpu_toolkit = r.strs("gpu_toolkit")
    f.cdi_specs = r.strs("cdi_specs")
    f.tools_probed = r.bool("tools_probed")
    f.notes = r.strs("notes")
    images = d.get("images")
    if images is not None:
        if not isinstance(images, dict):
            raise FactsFileError(f"{path}: {r.at('images')}: expected an object, got {_kind(images)}")
        for ref, item in images.items():
            x = _Reader(item, f"{r.at('images')}.{ref}", path)
            f.images[ref] = ImageInfo(
                ref=ref,
                node=x.str("node", "") or "",
                id=x.str("id"),
                entrypoint=x.strs("entrypoint"),
                cmd=x.strs("cmd"),
                labels=x.map("labels"),
                versions=x.map("versions", none_ok=True),
                cached=True,
                problem=x.str("problem"),
            )
    return f
