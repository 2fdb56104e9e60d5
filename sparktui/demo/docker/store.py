"""The docker stand-in's state on one node: images and containers as JSON files in the node's directory.

NODE_DIR/docker/
  lock                         flock held while names are checked and containers created/removed
  images/<hex id>.json         one image: Id, RepoTags, Size, Config (Env, Cmd, WorkingDir), ...
  containers/<hex id>/         one container: config.json (what docker inspect shows, fixed at create),
                               state.json (State, rewritten atomically), log.json (json-file driver),
                               root/ and tmp/ (the process's HOME and TMPDIR), memory/ (what its
                               simulated engines hold of the node's memory: sim/hostmem.py)
A container being removed is first renamed to .rm-<id>, so listings never show half of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ...sim import hostmem
from ..hardware import node_dir
from . import times

MEMORY_LEDGER = "memory"  # in a container's directory: what its processes hold of the node's memory


class DockerError(Exception):
    """A daemon error: str() is docker's message; code is the CLI's exit status."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def normalize_ref(ref: str) -> str:
    """repo:tag as `docker images` lists it: docker.io/library/ dropped, :latest added."""
    r = ref
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/", "index.docker.io/"):
        if r.startswith(prefix):
            r = r[len(prefix) :]
            break
    last = r.rsplit("/", 1)[-1]
    if "@" not in r and ":" not in last:
        r += ":latest"
    return r


def _read_json(path: Path) -> dict | None:
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def write_json(path: Path, data: dict) -> None:
    """Atomically: readers see the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def proc_start_ticks(pid: int) -> int | None:
    """A process's start time (clock ticks since boot): with the pid, names one process for good."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Container:
    dir: Path
    config: dict
    state: dict

    @property
    def id(self) -> str:
        return self.config["Id"]

    @property
    def name(self) -> str:
        return self.config["Name"].lstrip("/")

    @property
    def running(self) -> bool:
        return self.state.get("Status") == "running"

    @property
    def log_path(self) -> Path:
        return self.dir / "log.json"

    def inspect(self) -> dict:
        d = {k: v for k, v in self.config.items() if k != "CreatedNs"}
        d["State"] = {k: v for k, v in self.state.items() if not k.startswith("_")}
        return d


def new_state() -> dict:
    return {
        "Status": "created",
        "Running": False,
        "Paused": False,
        "Restarting": False,
        "OOMKilled": False,
        "Dead": False,
        "Pid": 0,
        "ExitCode": 0,
        "Error": "",
        "StartedAt": times.ZERO,
        "FinishedAt": times.ZERO,
    }


class Store:
    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else node_dir() / "docker"
        self.images_dir = self.root / "images"
        self.containers_dir = self.root / "containers"
        for d in (self.images_dir, self.containers_dir):
            d.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with (self.root / "lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # -- images -------------------------------------------------------------------------------
    def images(self) -> list[dict]:
        out = [_read_json(p) for p in sorted(self.images_dir.glob("*.json"))]
        return sorted((i for i in out if i), key=lambda i: i.get("CreatedNs", 0), reverse=True)

    def find_image(self, ref: str) -> dict | None:
        want = normalize_ref(ref)
        bare = ref.removeprefix("sha256:")
        for img in self.images():
            if want in img.get("RepoTags", []) or img["Id"] == ref:
                return img
            hexid = img["Id"].removeprefix("sha256:")
            if len(bare) >= 4 and all(c in "0123456789abcdef" for c in bare) and hexid.startswith(bare):
                return img
        return None

    def add_image(self, image: dict) -> None:
        """Store an image; its tags move away from any image that held them before."""
        with self.locked():
            for other in self.images():
                if other["Id"] != image["Id"] and set(other.get("RepoTags", [])) & set(image.get("RepoTags", [])):
                    other["RepoTags"] = [t for t in other["RepoTags"] if t not in image["RepoTags"]]
                    write_json(self.images_dir / (other["Id"].removeprefix("sha256:") + ".json"), other)
            old = self.find_image(image["Id"])
            if old:
                image["RepoTags"] = list(dict.fromkeys(old.get("RepoTags", []) + image.get("RepoTags", [])))
            write_json(self.images_dir / (image["Id"].removeprefix("sha256:") + ".json"), image)

    def remove_image(self, image: dict) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.images_dir / (image["Id"].removeprefix("sha256:") + ".json")).unlink()

    # -- containers ---------------------------------------------------------------------------
    def _load(self, d: Path) -> Container | None:
        config = _read_json(d / "config.json")
        if config is None:
            return None
        state = _read_json(d / "state.json") or new_state()
        c = Container(d, config, state)
        self._refresh(c)
        return c

    def _refresh(self, c: Container) -> None:
        """A container whose process is gone while its state still says running died with its supervisor."""
        if not c.running:
            return
        pid, ticks = c.state.get("Pid", 0), c.state.get("_ticks")
        if pid and proc_start_ticks(pid) is not None and (ticks is None or proc_start_ticks(pid) == ticks):
            return
        sup = c.state.get("_supervisor", 0)
        if sup and proc_start_ticks(sup) is not None:
            return  # the supervisor is still writing the exit down
        hostmem.release_ledger(c.dir / MEMORY_LEDGER)  # nobody else is left to give the memory back
        c.state.update(
            Status="exited", Running=False, Pid=0, ExitCode=137, FinishedAt=times.rfc3339(times.now_ns()), Error=""
        )
        with contextlib.suppress(OSError):
            write_json(c.dir / "state.json", c.state)

    def containers(self, all_: bool = True) -> list[Container]:
        out = []
        for d in self.containers_dir.iterdir():
            if d.name.startswith("."):
                continue
            c = self._load(d)
            if c is not None and (all_ or c.running):
                out.append(c)
        return sorted(out, key=lambda c: c.config.get("CreatedNs", 0), reverse=True)

    def find(self, ref: str) -> Container:
        """By full id, unique id prefix, or name; DockerError "No such container" otherwise."""
        ref_name = ref.lstrip("/")
        all_ = self.containers()
        for c in all_:
            if c.id == ref or c.name == ref_name:
                return c
        hits = [c for c in all_ if ref and c.id.startswith(ref)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise DockerError(f"Error response from daemon: multiple IDs found with provided prefix: {ref}")
        raise DockerError(f"Error response from daemon: No such container: {ref}")

    def create(self, config: dict) -> Container:
        """Give config an Id (and a Name when it has none) and store it; a taken name is docker's Conflict."""
        with self.locked():
            cid = secrets.token_hex(32)
            taken = {c.name: c for c in self.containers()}
            name = config.get("Name") or "/" + _random_name(taken)
            for c in [taken[name.lstrip("/")]] if name.lstrip("/") in taken else []:
                raise DockerError(
                    f'docker: Error response from daemon: Conflict. The container name "{name}" is already in '
                    f'use by container "{c.id}". You have to remove (or rename) that container to be able to '
                    f"reuse that name.",
                    125,
                )
            d = self.containers_dir / cid
            (d / "root").mkdir(parents=True)
            (d / "tmp").mkdir()
            now = times.now_ns()
            config.update(Id=cid, Name=name, Created=times.rfc3339(now), CreatedNs=now, LogPath=str(d / "log.json"))
            state = new_state()
            write_json(d / "config.json", config)
            write_json(d / "state.json", state)
            (d / "log.json").touch()
            return Container(d, config, state)

    def set_state(self, c: Container, **changes) -> None:
        c.state.update(changes)
        with contextlib.suppress(FileNotFoundError):
            write_json(c.dir / "state.json", c.state)

    def reload(self, c: Container) -> Container | None:
        return self._load(c.dir) if c.dir.exists() else None

    def remove(self, c: Container) -> None:
        gone = c.dir.with_name(f".rm-{c.id}")
        with self.locked():
            with contextlib.suppress(FileNotFoundError):
                os.replace(c.dir, gone)
        hostmem.release_ledger(gone / MEMORY_LEDGER)  # normally empty: the supervisor gave it back at the exit
        shutil.rmtree(gone, ignore_errors=True)


_LEFT = (
    "admiring",
    "brave",
    "clever",
    "eager",
    "focused",
    "gifted",
    "happy",
    "jolly",
    "keen",
    "lucid",
    "modest",
    "nifty",
    "quirky",
    "serene",
    "trusting",
    "vibrant",
    "wizardly",
    "zealous",
)
_RIGHT = (
    "babbage",
    "curie",
    "dijkstra",
    "euler",
    "fermi",
    "gauss",
    "hopper",
    "knuth",
    "lovelace",
    "noether",
    "pascal",
    "ritchie",
    "shannon",
    "turing",
    "wozniak",
)


def _random_name(taken) -> str:
    """A name no container holds: as dockerd's namesgenerator, another draw, then a digit after it."""
    for retry in range(64):
        name = f"{secrets.choice(_LEFT)}_{secrets.choice(_RIGHT)}" + (str(secrets.randbelow(10)) if retry else "")
        if name not in taken:
            return name
    return f"{secrets.choice(_LEFT)}_{secrets.token_hex(6)}"
