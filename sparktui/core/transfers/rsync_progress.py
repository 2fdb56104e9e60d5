"""Parse `rsync --info=progress2` output and explain rsync's exit codes. Pure functions, no I/O.

rsync writes one update about once a second, each starting with \\r (no \\n until it exits):
`\\r     43,319,296  27%   40.04MB/s    0:00:02  ` while a file is in flight (the time is the ETA),
`\\r     62,914,560  39%   40.17MB/s    0:00:01 (xfr#2, to-chk=5/8)` after a file finished (the time is
elapsed, the rate the average so far). Error messages from rsync or ssh end with \\n.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .eta import eta

# bytes may be comma- or dot-grouped (locale), or scaled with -h ("1.23G"); the rate uses "%7.2f".
_UPDATE = re.compile(
    r"^\s*(?P<bytes>\d[\d,.]{0,40})(?P<scale>[KMGTP])?\s+(?P<pct>\d{1,3})%"
    r"\s+(?P<rate>\d+(?:[.,]\d+)?)(?P<unit>[kKMGT]?B)/s"
    r"\s+(?P<time>\d+:\d{2}:\d{2}|\?\?:\?\?:\?\?)"
    r"(?:\s+\(xfr#(?P<xfr>\d+),\s*(?P<chk>to|ir)-chk=(?P<left>\d+)/(?P<total>\d+)\))?"
    r"(?:\s+(?P<rest>.*?))?\s*$",
    re.S,
)
_SCALE = {"": 1, "B": 1, "K": 1024, "k": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


@dataclass(frozen=True)
class RsyncUpdate:
    """One progress2 update."""

    bytes: int  # bytes handled so far (all files, including unchanged ones)
    percent: int
    rate: float  # bytes per second
    eta: float | None  # seconds left; only while a file is in flight and rsync can tell
    elapsed: float | None  # seconds since start; only on the update that closes a file
    files_done: int | None = None  # xfr#N
    files_left: int | None = None  # R of to-chk=R/T
    files_total: int | None = None  # T of to-chk=R/T (grows while listing)
    listing: bool = False  # ir-chk: the file list is still being built, totals will grow


def _seconds(hms: str) -> float | None:
    if "?" in hms:
        return None
    h, m, s = (int(x) for x in hms.split(":"))
    return float(h * 3600 + m * 60 + s)


def parse_update(segment: str) -> RsyncUpdate | None:
    """One \\r-separated segment -> RsyncUpdate, or None when it is not (only) a progress update."""
    u, rest = split_update(segment)
    return u if not rest else None


def split_update(segment: str) -> tuple[RsyncUpdate | None, str]:
    """A segment -> (update, text after it). An error rsync prints right after an update shares
    its segment: `   32,768   0%    0.00kB/s    0:00:00  rsync: [receiver] write failed ...`."""
    m = _UPDATE.match(segment)
    if not m:
        return None, segment.strip()
    return _update(m), (m["rest"] or "").strip()


def _update(m: re.Match) -> RsyncUpdate:
    raw = m["bytes"]
    if m["scale"]:
        nbytes = int(float(raw.replace(",", ".")) * _SCALE[m["scale"]])
    else:
        # a plain byte count is an integer: every separator is grouping
        nbytes = int(re.sub(r"[,.]", "", raw))
    # "%7.2f" is never grouped; the decimal point follows the locale
    rate = float(m["rate"].replace(",", ".")) * _SCALE[m["unit"][0]]
    t = _seconds(m["time"])
    closed = m["xfr"] is not None
    return RsyncUpdate(
        bytes=nbytes,
        percent=min(100, int(m["pct"])),
        rate=rate,
        eta=None if closed else t,
        elapsed=t if closed else None,
        files_done=int(m["xfr"]) if closed else None,
        files_left=int(m["left"]) if closed else None,
        files_total=int(m["total"]) if closed else None,
        listing=m["chk"] == "ir",
    )


def in_verifier_terms(
    u: RsyncUpdate, total_bytes: int | None, total_files: int | None, elapsed: float | None = None
) -> tuple[int | None, int | None, float | None]:
    """(files done, files in all, ETA seconds) that agree with the verifier's count of regular files.

    rsync's to-chk total also counts directories and xfr# skips files already in place, so the
    known file count wins and the files done are that count less the entries left (directories are
    listed first), never fewer than rsync says it sent. The ETA is bytes left at a measured rate
    (eta.py), not rsync's own, which its first samples make hours long; `elapsed`: seconds since the
    start (default: what a closing update says).
    """
    total = total_files or u.files_total
    done = u.files_done
    if total is not None and u.files_left is not None:
        done = max(0, min(total, max(u.files_done or 0, total - u.files_left)))  # sent ones were checked too
    return done, total, eta(total_bytes, u.bytes, u.rate, elapsed if elapsed is not None else u.elapsed)


class ProgressParser:
    """Incremental parser for a growing rsync log read in arbitrary chunks.

    feed() returns the updates and message lines completed by the chunk; a segment is complete
    once the next \\r or \\n arrives. pending() parses the unfinished tail when it already reads as
    a whole update (rsync leaves the latest one unterminated until the next second).
    Files counts are carried forward so every update knows the last xfr#/to-chk seen.
    """

    def __init__(self) -> None:
        self._tail = ""
        self.last: RsyncUpdate | None = None
        self.messages: list[str] = []  # non-progress lines: rsync/ssh errors and notes
        self._files: tuple[int | None, int | None, int | None, bool] = (None, None, None, False)

    def _carry(self, u: RsyncUpdate) -> RsyncUpdate:
        if u.files_done is not None:
            self._files = (u.files_done, u.files_left, u.files_total, u.listing)
            return u
        done, left, total, listing = self._files
        return RsyncUpdate(u.bytes, u.percent, u.rate, u.eta, u.elapsed, done, left, total, listing)

    def feed(self, chunk: str) -> tuple[list[RsyncUpdate], list[str]]:
        text = self._tail + chunk
        parts = re.split(r"[\r\n]", text)
        self._tail = parts.pop()
        updates: list[RsyncUpdate] = []
        lines: list[str] = []
        for seg in parts:
            u, rest = split_update(seg)
            if u is not None:
                u = self._carry(u)
                updates.append(u)
                self.last = u
            if rest:
                lines.append(rest)
        self.messages.extend(lines)
        del self.messages[:-200]  # keep the recent ones; the head of a long error storm adds nothing
        return updates, lines

    def pending(self) -> RsyncUpdate | None:
        u = parse_update(self._tail)
        return self._carry(u) if u is not None else None

    def latest(self) -> RsyncUpdate | None:
        """The most recent update, counting an unterminated one."""
        return self.pending() or self.last


def parse_log(text: str) -> tuple[list[RsyncUpdate], list[str]]:
    """A whole log at once: (updates, message lines)."""
    p = ProgressParser()
    updates, lines = p.feed(text)
    tail = p.pending()
    if tail is not None:
        updates.append(tail)
    elif p._tail.strip():
        lines.append(p._tail.strip())
    return updates, lines


RSYNC_EXIT = {
    0: "finished",
    1: "rsync rejected its arguments (syntax or usage error)",
    2: "the two rsync versions do not speak a common protocol",
    3: "rsync could not select the files to copy (a path is missing or not a directory)",
    4: "an option is not supported by the rsync on the other side",
    5: "rsync could not start talking to the other side",
    6: "the rsync daemon could not write its log",
    10: "network error: the connection to the destination failed or broke",
    11: "file I/O error: a file could not be read or written (full disk or permissions?)",
    12: "the rsync data stream broke (the other side died, ran out of space or lost the link)",
    13: "rsync could not write its diagnostics",
    14: "rsync could not start a child process",
    20: "rsync was stopped by a signal (cancelled or killed)",
    21: "a child process of rsync ended abnormally",
    22: "rsync ran out of memory",
    23: "some files were not copied (errors are listed above); run the sync again to resume",
    24: "some source files vanished while copying (something changed the model directory)",
    25: "the --max-delete limit stopped deletions",
    30: "timed out waiting for data from the other side",
    35: "timed out waiting for the rsync daemon",
    124: "the remote shell command timed out",
    125: "the remote shell could not start rsync",
    126: "rsync could not be run on the destination (permission denied)",
    127: "rsync is not installed on the destination (or not on its PATH)",
    255: "ssh from the source to the destination failed (no trust, unknown host key, or unreachable)",
}


def rsync_exit_message(code: int) -> str:
    """A plain sentence for an rsync exit status."""
    if code in RSYNC_EXIT:
        return RSYNC_EXIT[code]
    if code > 128:
        return f"rsync was killed by signal {code - 128}"
    return f"rsync failed with exit status {code}"


# Error lines worth showing first, in the order they usually explain a failure.
_TELLING = (
    "No space left on device",
    "Disk quota exceeded",
    "Permission denied",
    "Host key verification failed",
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "Connection refused",
    "Connection timed out",
    "No route to host",
    "command not found",
    "No such file or directory",
    "Read-only file system",
)


def telling_lines(lines: list[str], limit: int = 3) -> list[str]:
    """The message lines that best explain a failure: known causes first, then the latest ones.

    rsync's own summary ("rsync error: ... (code 23) at main.c(...)") only repeats the exit code,
    so it is shown only when nothing else was said.
    """
    known = [ln for key in _TELLING for ln in lines if key in ln]
    rest = [ln for ln in reversed(lines) if not ln.startswith("rsync error: ")]
    out: list[str] = []
    for ln in known + rest + list(reversed(lines)):
        if ln not in out:
            out.append(ln)
        if len(out) >= limit:
            break
    return out
