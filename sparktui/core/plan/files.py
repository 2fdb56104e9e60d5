"""Small files a plan carries into its containers (a recipe's mods: a chat template, a config).

Each file is written on every node under ~/.cache/sparktui/files/<digest>/ by a step before the node's
container starts, and mounted read-only at its path in the container. The content travels inside the
step's command (base64, one line), so it is bounded well below Linux's 128 KiB limit on one argument
(MAX_ARG_STRLEN, which `sh -c` is given the whole line as).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
import shlex

from ..engines.common import Step

MAX_FILE_BYTES = 64 * 1024  # base64 makes it ~87 KiB, under the 128 KiB of one argument
BASE = ".cache/sparktui/files"


def check_files(files: dict[str, str]) -> list[str]:
    """Errors for files a plan cannot carry: a path that is not absolute, content that is not base64, too big."""
    errors = []
    for inside, b64 in files.items():
        if not inside.startswith("/") or posixpath.normpath(inside) != inside or ":" in inside or "," in inside:
            errors.append(f"file {inside!r}: the path in the container must be absolute and plain (no ':' or ',')")
            continue
        try:
            data = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            errors.append(f"file {inside}: its content is not base64")
            continue
        if len(data) > MAX_FILE_BYTES:
            errors.append(f"file {inside}: {len(data)} bytes, more than the {MAX_FILE_BYTES} a plan carries")
    return errors


def home_path(inside: str, b64: str) -> str:
    """Where the file lives on a node, under the remote home: its digest keeps two versions apart."""
    digest = hashlib.sha256(f"{inside}\0{b64}".encode()).hexdigest()[:16]
    return f"/{BASE}/{digest}/{posixpath.basename(inside)}"


def mounts(files: dict[str, str]) -> list[tuple[str, str]]:
    return [(home_path(inside, b64), inside) for inside, b64 in sorted(files.items())]


def file_step(node: str, rank: int, files: dict[str, str]) -> Step:
    """One step that writes every file on the node (atomically: a half-written file is never mounted)."""
    parts, shown = [], []
    for inside, b64 in sorted(files.items()):
        rel = home_path(inside, b64)
        path = '"$HOME"' + shlex.quote(rel)
        tmp = '"$HOME"' + shlex.quote(rel + ".part")
        head = f'mkdir -p "$(dirname {path})" && printf %s '
        tail = f" | base64 -d > {tmp} && mv -f {tmp} {path}"
        parts.append(head + shlex.quote(b64) + tail)
        size = len(base64.b64decode(b64))
        shown.append(head + f"'<{size} bytes of {posixpath.basename(inside)}>'" + tail)
    names = ", ".join(posixpath.basename(i) for i in sorted(files))
    return Step(
        node=node,
        rank=rank,
        kind="file",
        command=" && ".join(parts),
        description=f"write {names} for the container",
        display=" && ".join(shown),
        script=" && ".join(parts),
    )
