"""Every remote command sparktui runs: node, start time, command (secrets masked), exit code, duration.

Kept in memory for the UI and appended to a JSON-lines file so `sparktui journal` can show
what earlier runs did.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from .secrets import MASK, is_secret_name, mask  # noqa: F401  (MASK, is_secret_name: re-exported)


def mask_secrets(text: str) -> str:
    """The command as journalled: secrets.mask, the one masking function."""
    return mask(text)


def default_journal_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "sparktui" / "journal.jsonl"


@dataclass
class Entry:
    node: str
    started: float  # unix time
    command: str  # secrets masked
    exit_status: int | None = None  # None while running, -1 when it never ran (link down)
    duration: float | None = None
    error: str | None = None
    cluster: str | None = None  # the config's cluster name: `journal` shows one cluster at a time


class Journal:
    """In-memory list plus an optional append-only file; listeners hear about every change."""

    def __init__(self, path: Path | None = None, keep: int = 5000, cluster: str | None = None):
        self.path = path
        self.cluster = cluster  # recorded with every entry (a Cluster sets its config's name)
        self.keep = keep
        self.entries: list[Entry] = []
        self.listeners: list[Callable[[Entry], None]] = []

    def start(self, node: str, command: str) -> Entry:
        e = Entry(node=node, started=time.time(), command=mask_secrets(command), cluster=self.cluster)
        self.entries.append(e)
        if len(self.entries) > self.keep:
            del self.entries[: len(self.entries) - self.keep]
        return e

    def finish(self, e: Entry, exit_status: int | None, error: str | None = None) -> None:
        e.exit_status = exit_status
        e.error = mask_secrets(error) if error else error  # a command's own stderr may echo a secret
        e.duration = time.time() - e.started
        self._persist(e)
        for cb in list(self.listeners):
            cb(e)

    def _persist(self, e: Entry) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(asdict(e)) + "\n")
        except OSError:
            pass  # the journal must never break the operation it records


def read_journal(path: Path, limit: int = 200, cluster: str | None = None) -> list[Entry]:
    """The last `limit` entries of a journal file, of one cluster when `cluster` is given (entries
    written before clusters were recorded belong to none); unreadable lines are skipped."""
    if not path.exists():
        return []
    out: list[Entry] = []
    for line in reversed(path.read_text(encoding="utf-8", errors="replace").splitlines()):
        if len(out) >= limit:
            break
        try:
            e = Entry(**json.loads(line))
        except (ValueError, TypeError):
            continue
        if cluster is None or e.cluster == cluster:
            out.append(e)
    return out[::-1]
