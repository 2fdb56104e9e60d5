"""Every remote command sparktui runs: node, start time, command (secrets masked), exit code, duration.

Kept in memory for the UI and appended to a JSON-lines file (0600) so `sparktui journal` can show what
earlier runs did. The file is bounded: past `max_bytes` it is rotated to FILE.1 (one generation kept),
and it is read from the end, so `journal --limit N` holds N entries and a block, never the file.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from . import statefile
from ..config.secrets import MASK, is_secret_name, mask  # noqa: F401  (MASK, is_secret_name: re-exported)

MAX_BYTES = 32 * 1024 * 1024  # rotate past this: some 100,000 commands, far more than anyone scrolls
BLOCK = 64 * 1024  # read back this much at a time
MAX_LINE = 1024 * 1024  # a longer line is damage, skipped without being held in memory
STARTED = (0.0, 1e11)  # unix times a journal can hold (time.localtime refuses far beyond)
FIX = "remove the damaged lines, or move the file away to start a new journal"


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

    @classmethod
    def from_json(cls, data: object, where: str) -> "Entry":
        """An entry from a parsed journal line; StateFileError when a field has the wrong type."""
        return statefile.load(cls, data, where, FIX, ranges={"started": STARTED})


class Journal:
    """In-memory list plus an optional append-only file; listeners hear about every change."""

    def __init__(
        self,
        path: Path | None = None,
        keep: int = 5000,
        cluster: str | None = None,
        max_bytes: int = MAX_BYTES,
        on_problem: Callable[[str], None] | None = None,
    ):
        self.path = path
        self.on_problem = on_problem  # told once when the file cannot be written (the CLI prints it)
        self.problem: str | None = None  # that sentence, once said
        self.cluster = cluster  # recorded with every entry (a Cluster sets its config's name)
        self.keep = keep
        self.max_bytes = max_bytes
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
            line = (statefile.dumps(asdict(e)) + "\n").encode("utf-8")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append(self.path, line, self.max_bytes)
        except (OSError, ValueError) as err:  # the journal must never break the operation it records
            if self.problem is None:  # but losing commands silently hides the record people rely on
                why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
                self.problem = f"the journal cannot be written ({self.path}: {why}); commands are not recorded"
                if self.on_problem is not None:
                    self.on_problem(self.problem)


def append(path: Path, line: bytes, max_bytes: int) -> None:
    """Append one line to a 0600 file, first rotating it to PATH.1 when it has reached max_bytes.

    Several processes append to one journal: the rotation happens under an flock, and only when the
    file at `path` is still the one measured, so two of them never rotate twice (losing a generation).
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC  # readable: fresh_line reads the last byte
    fd = os.open(path, flags, 0o600)
    try:
        st = os.fstat(fd)
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o600)  # a journal written 0644 by an older sparktui
        if st.st_size + len(line) > max_bytes and st.st_size > 0:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(path)
                if (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):
                    os.replace(path, str(path) + ".1")
            except FileNotFoundError:
                pass  # another process rotated it a moment ago and has not written the new one yet
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            old, fd = fd, -1
            os.close(old)
            fd = os.open(path, flags, 0o600)
        statefile.locked_append(fd, line)
    finally:
        if fd >= 0:
            os.close(fd)


OVERLONG = None  # what _lines_backwards yields for a line longer than MAX_LINE


def _lines_backwards(f, block: int = BLOCK, max_line: int = MAX_LINE) -> Iterator[bytes | None]:
    """The lines of a binary file, last first, holding at most a block and one line (<= max_line)."""
    f.seek(0, os.SEEK_END)
    pos = f.tell()
    carry = b""  # the start of the later data up to its first newline: the end of a line not yet whole
    dropping = False  # carry outgrew max_line: skip back to that line's start
    while pos > 0:
        n = min(block, pos)
        pos -= n
        f.seek(pos)
        parts = f.read(n).split(b"\n")
        if dropping:
            if len(parts) == 1:
                continue
            dropping = False
            yield OVERLONG  # parts[-1] is that line's start
            whole = parts[1:-1]
        else:
            parts[-1] += carry
            whole = parts[1:]
        yield from (OVERLONG if len(x) > max_line else x for x in reversed(whole))
        carry = parts[0]
        if len(carry) > max_line:
            carry, dropping = b"", True
    if dropping:
        yield OVERLONG
    elif carry:
        yield carry


@dataclass
class Tail:
    """The latest entries of a journal and what could not be read on the way to them."""

    entries: list[Entry] = field(default_factory=list)
    skipped: int = 0  # unreadable lines passed over
    problem: str | None = None  # the newest of them, in words

    def warning(self) -> str | None:
        """One line for the terminal when lines were skipped."""
        if not self.skipped:
            return None
        return f"{self.skipped} unreadable journal line(s) skipped; the newest: {self.problem}"


def tail_journal(path: Path, limit: int = 200, cluster: str | None = None) -> Tail:
    """The last `limit` entries of a journal (and its rotated PATH.1), of one cluster when `cluster` is given
    (entries written before clusters were recorded belong to none).

    Unreadable lines are skipped and counted; a journal that is no file (a directory, no permission) is a
    StateFileError. Memory holds `limit` entries and one block, whatever the file's size.
    """
    out = Tail()
    for p in (path, Path(str(path) + ".1")):
        if len(out.entries) >= limit:
            break
        try:
            f = open(p, "rb")
        except FileNotFoundError:
            continue
        except OSError as e:
            raise statefile.StateFileError(
                str(p), _os_words(e), "move it away; sparktui keeps its journal there"
            ) from None
        with f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise statefile.StateFileError(
                    str(p), "is not a file", "move it away; sparktui keeps its journal there"
                )
            _collect(f, str(p), limit, cluster, out)
    out.entries.reverse()
    return out


def _needles(cluster: str | None) -> tuple[bytes, ...]:
    """The forms a cluster's name takes in a JSON line (escaped to ASCII as sparktui writes it, or not)."""
    if cluster is None:
        return ()
    return tuple({json.dumps(cluster)[1:-1].encode(), json.dumps(cluster, ensure_ascii=False)[1:-1].encode()})


def _collect(f, where: str, limit: int, cluster: str | None, out: Tail) -> None:
    needles = _needles(cluster)
    try:
        for raw in _lines_backwards(f):
            if len(out.entries) >= limit:
                return
            if raw is not None and not raw.strip():
                continue
            if needles and raw is not None and not any(n in raw for n in needles):
                continue  # another cluster's line (or damage that is not this cluster's): not parsed at all
            try:
                if raw is None:
                    raise statefile.StateFileError(where, f"a line is longer than {MAX_LINE} bytes", FIX)
                e = Entry.from_json(statefile.parse_json(raw, where, FIX), where)
            except statefile.StateFileError as err:
                out.skipped += 1
                out.problem = out.problem or err.line()
                continue
            if cluster is None or e.cluster == cluster:
                out.entries.append(e)
    except OSError as e:  # an I/O error halfway
        raise statefile.StateFileError(where, _os_words(e), FIX) from None


def _os_words(e: OSError) -> str:
    if e.errno == errno.EISDIR:
        return "is a directory, not a journal file"
    return f"cannot be read ({e.strerror or e})"


def read_journal(path: Path, limit: int = 200, cluster: str | None = None) -> list[Entry]:
    """tail_journal's entries alone."""
    return tail_journal(path, limit, cluster).entries
