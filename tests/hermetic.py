"""Keeps the suite off the running user's own sparktui files (tests/conftest.py wires it in).

- Homes: every test runs with HOME, XDG_STATE_HOME, XDG_CONFIG_HOME and XDG_CACHE_HOME in a sandbox beside
  its tmp_path (<tmp_path>-homes/client), session-scoped fixtures in one of the session's. Every in-process
  SSH node (LocalSshServer) that takes its environment from this process gets a home of its own there
  too (<tmp_path>-homes/node1, node2, ...): the ssh tier runs the nodes' "remote" commands on this machine
  as this user, so they would otherwise share the user's transfers, deployment records and journal. The
  sandbox sits beside tmp_path, not in it, because some tests assert what their tmp_path holds.
- Guard: the user's real ~/.local/state/sparktui, ~/.config/sparktui and ~/.cache/sparktui are compared
  before and after each test (metadata) and at the end of the session (contents); any file created,
  changed or removed fails the test, and the suite. The contract tier's venv cache
  ($SPARKTUI_CONTRACT_CACHE, default ~/.cache/sparktui/contract) and the real engine's image cache
  ($SPARKTUI_ENGINE_CACHE, default ~/.cache/sparktui/engine, tools/build_engine_image.py) are exempt, and
  pinned to the real home before HOME moves, so the tests keep finding them.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pwd
import stat
from pathlib import Path

HOME_VARS = ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
WATCHED = (".local/state/sparktui", ".config/sparktui", ".cache/sparktui")
CONTRACT_CACHE = ".cache/sparktui/contract"
ENGINE_CACHE = ".cache/sparktui/engine"


def home_env(home: Path) -> dict[str, str]:
    """The variables that place a user's files, for a user whose home is `home` (XDG defaults spelled out)."""
    return {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


class Homes:
    """A sandbox of homes: `client` for the test process, a new one per simulated node."""

    def __init__(self, root: Path):
        self.root = root
        self.nodes = 0

    def _make(self, name: str) -> dict[str, str]:
        home = self.root / name
        home.mkdir(parents=True, exist_ok=True)  # a login's HOME exists; what goes under it is made on demand
        return home_env(home)

    def client(self) -> dict[str, str]:
        return self._make("client")

    def next_node(self) -> dict[str, str]:
        self.nodes += 1
        return self._make(f"node{self.nodes}")


current: Homes | None = None  # the running test's sandbox (the session's between tests)


def _give_nodes_homes(init):
    """Wraps LocalSshServer.__init__: a node that inherits this process's environment gets its own home."""
    sig = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        if not bound.arguments["inherit_env"] or current is None:
            return  # the caller built the node's whole environment (the demo's nodes do)
        given = bound.arguments["env"] or {}
        own = home_env(Path(given["HOME"])) if "HOME" in given else current.next_node()
        self.env.update({k: v for k, v in own.items() if k not in given})

    __init__.hermetic_original = init
    return __init__


def install_node_homes() -> None:
    from sparktui.demo.sshserver import LocalSshServer

    if not hasattr(LocalSshServer.__init__, "hermetic_original"):
        LocalSshServer.__init__ = _give_nodes_homes(LocalSshServer.__init__)


def uninstall_node_homes() -> None:
    from sparktui.demo.sshserver import LocalSshServer

    original = getattr(LocalSshServer.__init__, "hermetic_original", None)
    if original is not None:
        LocalSshServer.__init__ = original


def user_home() -> Path:
    """The running user's home as sparktui finds it: $HOME (expanduser's rule), else the password database."""
    home = os.environ.get("HOME", "")
    return Path(home if os.path.isabs(home) else pwd.getpwuid(os.getuid()).pw_dir)


def pin_contract_cache() -> Path:
    """Point SPARKTUI_CONTRACT_CACHE where tests/contract/venvs.py finds it now, before HOME moves (a value
    the user set is kept)."""
    os.environ.setdefault("SPARKTUI_CONTRACT_CACHE", str(user_home() / CONTRACT_CACHE))
    return Path(os.environ["SPARKTUI_CONTRACT_CACHE"])


def pin_engine_cache() -> Path:
    """The same for the real engine's environment and image (tools/build_engine_image.py)."""
    os.environ.setdefault("SPARKTUI_ENGINE_CACHE", str(user_home() / ENGINE_CACHE))
    return Path(os.environ["SPARKTUI_ENGINE_CACHE"])


class Guard:
    """The user's sparktui directories, to compare before and after (exempt paths left out)."""

    def __init__(self, home: Path, exempt: list[Path]):
        self.roots = [home / w for w in WATCHED]
        self.exempt = {os.path.realpath(p) for p in exempt}
        # making an exempt directory makes its parents (~/.cache/sparktui): their presence is exempt too
        self.parents = {str(parent) for p in self.exempt for parent in Path(p).parents}

    def _entries(self):
        for root in self.roots:
            if os.path.lexists(root) and os.path.realpath(root) not in self.parents:
                yield str(root)
            for dirpath, dirs, files in os.walk(root):  # does not follow links; a missing root yields nothing
                real = [os.path.realpath(os.path.join(dirpath, d)) for d in dirs]
                dirs[:] = [d for d, r in zip(dirs, real) if r not in self.exempt]
                yield from (os.path.join(dirpath, d) for d, r in zip(dirs, real) if r not in self.exempt | self.parents)
                yield from (os.path.join(dirpath, f) for f in files)

    def stats(self) -> dict[str, tuple]:
        """Cheap, for every test: type, size, mtime and ctime (a rewrite of the same bytes changes them)."""
        out = {}
        for p in self._entries():
            try:
                st = os.lstat(p)
            except OSError:
                continue  # removed while walking: the next look will miss it
            out[p] = (
                (stat.S_IFMT(st.st_mode),)
                if stat.S_ISDIR(st.st_mode)
                else (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            )
        return out

    def digests(self) -> dict[str, str]:
        """Contents, for the session: a file's SHA-256, a link's target, a directory's presence."""
        out = {}
        for p in self._entries():
            try:
                if os.path.islink(p):
                    out[p] = "-> " + os.readlink(p)
                elif os.path.isdir(p):
                    out[p] = "dir"
                else:
                    h = hashlib.sha256()
                    with open(p, "rb") as f:
                        for chunk in iter(lambda: f.read(1 << 20), b""):
                            h.update(chunk)
                    out[p] = f"{os.lstat(p).st_mode:o} {h.hexdigest()}"
            except OSError as e:
                out[p] = f"unreadable: {e.strerror}"
        return out


def changes(before: dict, after: dict) -> list[str]:
    """What happened between two looks, one line per path."""
    lines = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    lines += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return lines


def report(lines: list[str], most: int = 20) -> str:
    shown = lines[:most] + ([f"... and {len(lines) - most} more"] if len(lines) > most else [])
    return (
        "the user's own sparktui files changed while the tests ran (a test must use the HOME and XDG "
        "directories the suite gives it; or another process on this machine wrote them meanwhile):\n  "
        + "\n  ".join(shown)
    )
