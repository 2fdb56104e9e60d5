"""What a transfer is (meta.json) and where it stands (read back from its state directory)."""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import asdict, dataclass, field

from ..state import statefile
from ..state.events import TransferProgress
from .remote import RS, STATE_ROOT
from .rsync_progress import in_verifier_terms, parse_log, rsync_exit_message, telling_lines
from .streams import StreamState, combine, parse_stream_line, stream_rows

# states a transfer can be in, as shown by `sync status` and carried by TransferProgress
RUNNING, UNVERIFIED, DONE, FAILED, CANCELLED, LOST = "running", "unverified", "done", "failed", "cancelled", "lost"
UNREADABLE = "unreadable"  # its meta.json is damaged: listed with the reason, never a crash of the listing
ENDED = (DONE, FAILED, CANCELLED, LOST)


def new_id(kind: str, dest: str, now: float | None = None) -> str:
    """model-node2-20250101T120000-3fa2: sortable by time, unique, safe as a directory name."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{kind}-{re.sub(r'[^A-Za-z0-9_.-]', '_', dest)[:40]}-{stamp}-{secrets.token_hex(2)}"


@dataclass
class TransferMeta:
    """Written once to meta.json when the transfer starts."""

    id: str
    kind: str  # model | image
    source: str
    dest: str
    addr: str  # destination address the source dials (fabric)
    user: str  # login on the destination
    path: str | None = None  # model directory (same on both sides)
    image: str | None = None  # image reference
    image_id: str | None = None  # the source's image ID, which the destination must end with
    started: float = field(default_factory=time.time)  # unix time on sparktui's clock
    total_bytes: int | None = None
    total_files: int | None = None
    streams: int = 1  # parallel rsync streams of a model copy (an older meta.json has none: 1)
    cipher: str | None = None  # what the copy's ssh encrypts with, as negotiated with the peer
    cipher_note: str | None = None  # why not the preferred cipher, when it fell back

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: object, where: str = "meta.json") -> "TransferMeta":
        """The meta from its parsed JSON; StateFileError when a field is missing or of the wrong type."""
        return statefile.load(cls, d, where, FIX)


FIX = "remove that transfer's directory (the copy itself is untouched) and run the sync again if it is needed"


def meta_where(node: str, tid: str) -> str:
    """A transfer's meta.json in messages: NODE:~/.local/state/sparktui/transfers/ID/meta.json."""
    return f"{node + ':' if node else ''}~/{STATE_ROOT}/{tid}/meta.json"


@dataclass
class Unreadable:
    """A transfer whose state directory could not be read: one line, and the rest of the listing goes on."""

    id: str
    node: str
    problem: str  # StateFileError.line(): the file, what is wrong, the way out

    def to_dict(self) -> dict:
        """The keys of TransferRecord.to_dict, so `sync status` and `status --json` list it like the others."""
        return {
            "id": self.id,
            "kind": None,
            "source": self.node or None,
            "dest": None,
            "state": UNREADABLE,
            "rc": None,
            "started": None,
            "path": None,
            "image": None,
            "bytes": None,
            "total_bytes": None,
            "percent": None,
            "rate": None,
            "eta": None,
            "elapsed": None,
            "files_done": None,
            "files_total": None,
            "message": self.problem,
            "verified": None,
            "streams": None,
            "stream_progress": None,
            "cipher": None,
            "cipher_note": None,
            "summary": f"{self.id}: unreadable — {self.problem}",
        }


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


@dataclass
class TransferRecord:
    """A transfer as found in its state directory."""

    meta: TransferMeta
    rc: int | None = None
    alive: bool = False
    cancelled: bool = False
    verified: dict | None = None
    count: int | None = None  # image bytes through the pipe
    tail: str = ""  # last bytes of the log, \r and \n restored
    now: float | None = None  # the node's clock when read
    streams: list[StreamState] = field(default_factory=list)  # extra streams of a parallel copy

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def state(self) -> str:
        if self.rc is None:
            if self.alive:
                return RUNNING
            return CANCELLED if self.cancelled else LOST
        if self.rc == 0:
            if self.verified is None:
                return UNVERIFIED
            return DONE if self.verified.get("ok") else FAILED
        return CANCELLED if self.cancelled else FAILED

    def message(self) -> str | None:
        return describe_end(self.meta, self.state, self.rc, self.tail, self.verified)

    def progress(self) -> TransferProgress:
        m = self.meta
        p = TransferProgress(
            id=m.id,
            kind=m.kind,
            source=m.source,
            dest=m.dest,
            state=self.state,
            total_bytes=m.total_bytes,
            files_total=m.total_files,
            message=self.message(),
        )
        if self.state == RUNNING:
            p.elapsed = max(0.0, time.time() - m.started)
        if m.kind == "model":
            updates, _ = parse_log(self.tail)
            u = combine(updates[-1] if updates else None, self.streams, m.total_bytes)
            if self.streams:
                p.streams = stream_rows(updates[-1] if updates else None, self.streams, self.rc is not None)
            p.cipher = m.cipher
            if u is not None:
                p.bytes, p.percent, p.rate = u.bytes, float(u.percent), u.rate
                p.elapsed = u.elapsed if u.elapsed is not None else p.elapsed
                p.files_left = u.files_left
                p.files_done, p.files_total, p.eta = in_verifier_terms(u, m.total_bytes, m.total_files, p.elapsed)
        elif self.count is not None:
            p.bytes = self.count
            if m.total_bytes:
                p.percent = min(100.0, 100.0 * self.count / m.total_bytes)
        if p.state == DONE:
            p.percent = 100.0
        return p

    def to_dict(self) -> dict:
        p = self.progress()
        d = {
            "id": self.id,
            "kind": self.meta.kind,
            "source": self.meta.source,
            "dest": self.meta.dest,
            "state": self.state,
            "rc": self.rc,
            "started": self.meta.started,
            "path": self.meta.path,
            "image": self.meta.image,
            "bytes": p.bytes,
            "total_bytes": p.total_bytes,
            "percent": p.percent,
            "rate": p.rate,
            "eta": p.eta,
            "elapsed": p.elapsed,
            "files_done": p.files_done,
            "files_total": p.files_total,
            "message": p.message,
            "verified": self.verified,
            "streams": self.meta.streams,
            "stream_progress": p.streams,
            "cipher": self.meta.cipher,
            "cipher_note": self.meta.cipher_note,
        }
        return d


def describe_end(meta: TransferMeta, state: str, rc: int | None, log: str, verified: dict | None) -> str | None:
    """Plain words for how a transfer ended (None while it runs)."""
    if state == RUNNING:
        return None
    if state == CANCELLED:
        return (
            (
                f"cancelled; {meta.dest} counts as model incomplete, its partial files are kept and the next "
                f"sync resumes from them"
            )
            if meta.kind == "model"
            else "cancelled"
        )
    if state == LOST:
        return (
            "the transfer process is gone without an exit status "
            f"(was {meta.source} rebooted or the process killed?); run the sync again"
        )
    if state == UNVERIFIED:
        return "copied; not verified yet"
    if state == DONE:
        return (verified or {}).get("message") or "verified"
    if rc == 0 and verified is not None:
        return verified.get("message") or "verification failed"
    _, lines = parse_log(log)
    why = telling_lines(lines)
    if meta.kind == "model":
        head = f"rsync exit {rc}: {rsync_exit_message(rc if rc is not None else -1)}"
    elif rc == 255:
        head = f"ssh from {meta.source} to {meta.dest} ({meta.addr}) failed"
    else:
        head = f"docker save | docker load failed (exit {rc})"
    tail = (
        f"; {meta.dest} counts as model incomplete until a sync completes it (partial files are kept)"
        if meta.kind == "model"
        else ""
    )
    return head + (" — " + " | ".join(why) if why else "") + tail


def parse_listing(text: str, node: str = "", problems: list[Unreadable] | None = None) -> list[TransferRecord]:
    """Records from remote.list_states() output on `node`; a record whose meta.json cannot be used is left
    out, and said in `problems` when given."""
    out: list[TransferRecord] = []
    for chunk in text.split("@@ ")[1:]:
        lines = chunk.split("\n")
        words = lines[0].split()
        head = dict(kv.split("=", 1) for kv in words[1:] if "=" in kv)
        body: dict[str, str] = {}
        streams = [
            st
            for ln in lines[1:]
            if ln.startswith("stream=")
            for st in [parse_stream_line(ln[len("stream=") :])]
            if st is not None
        ]
        for ln in lines[1:]:
            if "=" in ln:
                k, v = ln.split("=", 1)
                body[k] = v
        tid = words[0] if words else "?"
        where = meta_where(node, tid)
        try:
            meta = TransferMeta.from_json(statefile.parse_json(body.get("meta", ""), where, FIX), where)
        except statefile.StateFileError as e:
            if problems is not None:
                problems.append(Unreadable(tid, node, e.line()))
            continue
        out.append(
            TransferRecord(
                meta=meta,
                rc=_int(head.get("rc")),
                alive=head.get("alive") == "1",
                cancelled=head.get("cancelled") == "1",
                verified=_verified(body.get("verified")),
                count=_int(body.get("count")),
                tail=body.get("tail", "").replace(RS, "\n"),
                now=_int(head.get("now")),
                streams=streams,
            )
        )
    out.sort(key=lambda r: r.meta.started)
    return out


def _verified(text: str | None) -> dict | None:
    """The verification record: {"ok": bool, "message": str, ...}; anything else reads as a failed one."""
    if not text:
        return None
    try:
        v = statefile.parse_json(text, "verified")
    except statefile.StateFileError:
        v = None
    if (
        not isinstance(v, dict)
        or not isinstance(v.get("ok"), bool)
        or not isinstance(v.get("message"), (str, type(None)))
    ):
        return {"ok": False, "message": "unreadable verification record"}
    return v


@dataclass
class Poll:
    """One read of a running transfer (remote.read_state)."""

    rc: int | None
    alive: bool
    size: int  # log size on the node
    count: int | None
    now: int | None
    cancelled: bool
    data: str  # log text from the offset asked for
    nbytes: int  # how many log bytes `data` stands for (advance the offset by this)
    streams: list[StreamState] = field(default_factory=list)  # extra streams of a parallel copy
    main_rc: int | None = None  # stream 0's status once it ended (the job may still wait for others)


def parse_poll(stdout: str) -> Poll:
    header, _, data = stdout.partition("\n")
    kv = dict(x.split("=", 1) for x in header.split() if "=" in x)
    if "size" not in kv:
        raise ValueError(f"unexpected answer: {header[:200]!r}")
    streams = []
    for _ in range(min(_int(kv.get("streams")) or 0, 256)):
        line, _, data = data.partition("\n")
        st = parse_stream_line(line)
        if st is not None:
            streams.append(st)
    return Poll(
        rc=_int(kv.get("rc")),
        alive=kv.get("alive") == "1",
        size=_int(kv.get("size")) or 0,
        count=_int(kv.get("count")),
        now=_int(kv.get("now")),
        cancelled=kv.get("cancelled") == "1",
        data=data,
        nbytes=_int(kv.get("n")) or 0,
        streams=streams,
        main_rc=_int(kv.get("s0")),
    )
