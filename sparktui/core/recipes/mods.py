"""A sparkrun recipe's `mods`: which sparktui can carry, and why the others are refused.

In sparkrun (spark-arena/sparkrun v0.2.40, src/sparkrun/core/mods.py) a mod is a directory holding
`run.sh` and its files; sparkrun copies it into the running container at /workspace/mods/NAME and runs
`export WORKSPACE_DIR=$PWD && cd /workspace/mods/NAME && ./run.sh` before the serve command. It looks for
the directory next to the recipe (`NAME`, then `mods/NAME`; a leading `mods/` is dropped), then in
registries (`@registry/NAME`, the recipe's own, eugr's).

sparktui runs the image as named and never executes a script in it, so it carries a mod only when all
its run.sh does is put files of the mod into the workspace (eugr's fix-qwen3.5-chat-template:
`cp chat_template.jinja $WORKSPACE_DIR/unsloth.jinja`). Those files are mounted read-only in the
container and the engine arguments that name them get their absolute path. A mod that patches the
engine, installs packages or runs code is refused with the line that does it.
"""

from __future__ import annotations

import base64
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..plan.files import MAX_FILE_BYTES
from ..config.secrets import shorten

INSIDE = "/sparktui/mods"  # where carried files are mounted in the container
_SET = re.compile(r"set(\s+-[a-zA-Z]+|\s+-o\s+\w+|\s+\+[a-zA-Z]+)*\Z")
_WORKSPACE = re.compile(r"(?:\$WORKSPACE_DIR|\$\{WORKSPACE_DIR\})/([A-Za-z0-9._-]+)\Z")
_NAME = re.compile(r"[A-Za-z0-9._-]+\Z")
MAX_RUN_SH = 64 * 1024


@dataclass
class Mods:
    files: dict[str, str] = field(default_factory=dict)  # container path -> base64 content
    names: dict[str, str] = field(default_factory=dict)  # workspace-relative name -> container path
    applied: list[str] = field(default_factory=list)  # what was carried, in words
    refused: list[str] = field(default_factory=list)  # mod -> why not, in words


def resolve(mods: list[str], recipe_path: str) -> Mods:
    out = Mods()
    base = Path(recipe_path).parent if recipe_path and not recipe_path.startswith("<") else None
    for ref in mods:
        why = _one(ref, base, out)
        if why:
            out.refused.append(f"mods: {ref} not applied: {why}")
    return out


def _one(ref: str, base: Path | None, out: Mods) -> str:
    if ref.startswith("@"):
        return (
            "a registry mod, which sparkrun fetches and sparktui does not; copy its directory next to the "
            "recipe (mods/NAME with its run.sh)"
        )
    rel = ref.removeprefix("mods/")
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        return "not a directory name next to the recipe"
    if base is None:
        return "the recipe was not read from a file, so there is no directory to find the mod in"
    tried = [base / rel, base / "mods" / rel]
    found = next((d for d in tried if (d / "run.sh").is_file()), None)
    if found is None:
        return (
            f"no mod directory with a run.sh at {' or '.join(str(t) for t in tried)} (sparkrun would try "
            f"its registries, eugr's last); copy the mod there"
        )
    try:
        script = (found / "run.sh").read_bytes()[: MAX_RUN_SH + 1].decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return f"its run.sh cannot be read ({e})"
    if len(script) > MAX_RUN_SH:
        return "its run.sh is larger than a mod that only copies files"
    name = found.name
    files: dict[str, str] = {}
    names: dict[str, str] = {}
    for raw in script.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or _SET.match(line):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            return f"its run.sh has a line sparktui cannot read: {shorten(line, 80)!r}"
        if not words or words[0] == "echo":
            continue  # a message for the person reading the log
        if words[0] == "cp" and len(words) in (3, 4) and (len(words) == 3 or words[1] in ("-f", "-p")):
            src, dest = words[-2], words[-1]
            m = _WORKSPACE.match(dest)
            srcp = found / src
            if m and _NAME.match(posixpath.basename(src)) and ".." not in Path(src).parts and srcp.is_file():
                data = srcp.read_bytes()
                if len(data) > MAX_FILE_BYTES:
                    return f"{src} is {len(data)} bytes, more than the {MAX_FILE_BYTES} a plan carries"
                inside = f"{INSIDE}/{name}/{m.group(1)}"
                files[inside] = base64.b64encode(data).decode("ascii")
                names[m.group(1)] = inside
                continue
        return (
            f"its run.sh runs `{shorten(line, 100)}` in the container, and sparktui runs the image as named "
            f"(it carries only files copied into the workspace); use an image with the mod applied (--image)"
        )
    if not files:
        return "its run.sh copies no file into the workspace: nothing to carry"
    out.files.update(files)
    out.names.update(names)
    out.applied.append(f"mods: {ref} applied: " + ", ".join(f"{n} mounted at {p}" for n, p in names.items()))
    return ""


def rewrite_args(args: list[str], names: dict[str, str]) -> list[str]:
    """Engine arguments that name a carried file (relative to the workspace) get its path in the container."""
    if not names:
        return list(args)

    def one(a: str) -> str:
        for prefix in ("$WORKSPACE_DIR/", "${WORKSPACE_DIR}/", "/workspace/", "./", ""):
            if a.startswith(prefix) and a[len(prefix) :] in names:
                return names[a[len(prefix) :]]
        return a

    out = []
    for a in args:
        flag, eq, val = a.partition("=")
        out.append(f"{flag}={one(val)}" if eq and flag.startswith("-") else one(a))
    return out


_FILE_FLAGS = ("--chat-template", "--tool-parser-plugin", "--jinja-template")


def missing_files(args: list[str], carried: dict[str, str]) -> list[str]:
    """Flags naming a relative file that no carried mod provides: the engine would not find it."""
    out = []
    for i, a in enumerate(args):
        flag, eq, val = a.partition("=")
        if flag not in _FILE_FLAGS:
            continue
        value = val if eq else (args[i + 1] if i + 1 < len(args) else "")
        if value and not value.startswith("/") and "." in value and value not in carried.values():
            out.append(f"{flag} {value}")
    return out
