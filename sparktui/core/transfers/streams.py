"""Parallel rsync streams for one model copy: which files each stream carries, the job that runs
them, and one progress made of theirs. Plan and progress are pure; the job is POSIX sh.

One rsync over one ssh is bound by a core or two (rsync's sender and ssh's cipher) long before a
fabric link is full, so a copy with several large files runs k rsync processes side by side.
Stream 0 is today's whole-tree rsync less the files given to the others: it keeps every
directory, link and small file, and any name a filter or file list could misread. Streams 1..k-1
each carry a list of large files (--files-from). All run in the transfer's one job (one process
group: cancel stops them together), each retries a broken connection a few times, and the job
fails with the first failing stream's status, naming every stream that fell short.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from . import remote
from .rsync_progress import RsyncUpdate, parse_log

LARGE = 16 << 20  # a file this big is worth a stream of its own (a stream costs one ssh handshake)
RETRIES = 2  # a stream whose connection broke (rsync 10, 12, 30, 35, ssh 255) starts again this often
RETRY_CODES = (10, 12, 30, 35, 255)
CORES_PER_STREAM = 2  # rsync's sender and its ssh each keep about one core busy at link speed
_UNSAFE = re.compile(r"[\n\r*?\[\\]|^[#;\s]|\s$|/[#;\s]|\s/")  # names a filter or --files-from line could misread


@dataclass
class StreamPlan:
    """What each stream carries. lists[0] is empty: stream 0 takes everything the others do not."""

    lists: list[list[str]] = field(default_factory=lambda: [[]])
    bytes: list[int] = field(default_factory=lambda: [0])
    whole_file: list[bool] = field(default_factory=lambda: [False])

    @property
    def count(self) -> int:
        return len(self.lists)


def stream_count(cores: int | None, large_files: int, limit: int) -> int:
    """k from the sender's cores and the number of large files, bounded by `limit`."""
    by_cores = max(1, (cores or 1) // CORES_PER_STREAM)
    return max(1, min(limit, by_cores, max(1, large_files)))


def plan(src: dict[str, int], dst: dict[str, int] | None, k: int, large: int = LARGE) -> StreamPlan:
    """Split source files {name: size} over k streams, largest first onto the lightest stream.

    Only large files the destination lacks leave stream 0: a file already there (a partial one of
    a cut-off copy, or a complete one) stays with stream 0, whose delta transfer resumes it as
    today. Streams of files the destination lacks send whole files (--whole-file): there is no
    basis to diff against, so rsync's block search would only spend CPU.
    """
    dst = dst or {}
    movable = sorted(
        (n for n, s in src.items() if s >= large and n not in dst and not _UNSAFE.search(n)), key=lambda n: (-src[n], n)
    )
    k = max(1, min(k, len(movable) + 1))
    lists: list[list[str]] = [[] for _ in range(k)]
    load = [0] * k
    if k > 1:
        # stream 0 starts with what only it carries: small files and files the destination has
        load[0] = sum(s for n, s in src.items() if n not in movable and dst.get(n) != s)
        for n in movable:
            i = min(range(k), key=lambda j: (load[j], j))
            lists[i].append(n)
            load[i] += src[n]
        lists[0] = []  # what landed on stream 0 needs no list: it takes all that no other stream names
    else:
        load[0] = sum(s for n, s in src.items() if dst.get(n) != s)
    keep = [0] + [i for i in range(1, k) if lists[i]]
    out = StreamPlan([lists[i] for i in keep], [load[i] for i in keep], [True] * len(keep))
    given = {n for lst in out.lists[1:] for n in lst}
    out.whole_file[0] = not any(n in dst and dst[n] != s for n, s in src.items() if n not in given)
    return out


def list_name(i: int) -> str:
    return f"files.{i}"


def state_files(p: StreamPlan) -> dict[str, str]:
    """Files the job reads from its state directory: stream i's list, and stream 0's exclusions."""
    if p.count == 1:
        return {}
    out = {list_name(i): "".join(n + "\n" for n in lst) for i, lst in enumerate(p.lists) if i}
    out[list_name(0)] = "".join(f"/{n}\n" for lst in p.lists[1:] for n in lst)  # anchored: exactly that file
    return out


def split_bwlimit(bwlimit: str | None, k: int) -> str | None:
    """Each stream's share of the copy's --bwlimit ("200m" over 2 streams: "100.000m")."""
    if not bwlimit or k <= 1:
        return bwlimit
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", bwlimit)
    if not m:
        return bwlimit  # rsync says what is wrong with it
    return f"{float(m[1]) / k:.3f}{m[2]}"


def job(
    p: StreamPlan,
    src_path: str,
    user: str,
    addr: str,
    dest_path: str,
    ssh: list[str],
    io_timeout: int = 300,
    bwlimit: str | None = None,
) -> str:
    """The job script: streams 1..k-1 in the background (log.i, rc.i), stream 0 in the foreground
    (the job's own log), then one exit status for them all."""
    e = shlex.join(ssh)
    src = remote.home_word(src_path.rstrip("/") or "/") + "/"
    dst = shlex.quote(f"{remote.peer(user, addr)}:{remote.rsync_remote_path(dest_path).rstrip('/')}/")
    limit = split_bwlimit(bwlimit, p.count)

    def rsync(i: int) -> str:
        words = [
            "rsync",
            "-a",
            "--copy-unsafe-links",
            "--partial",
            "--info=progress2",
            "-s",
            f"--timeout={int(io_timeout)}",
            f"--exclude=/{remote.MARKER}",
        ]
        if p.whole_file[i]:
            words.append("--whole-file")
        if limit:
            words.append(f"--bwlimit={limit}")
        if p.count > 1:
            words.append(f"--exclude-from={list_name(0)}" if i == 0 else f"--files-from={list_name(i)}")
        return f"{shlex.join(words)} -e {shlex.quote(e)} {src} {dst}"

    if p.count == 1:
        return f"LC_ALL=C {rsync(0)}"  # C locale: the progress numbers in one format
    codes = "|".join(str(c) for c in RETRY_CODES)
    lines = [
        "LC_ALL=C; export LC_ALL",
        # one stream, retried while its connection is what failed; its status is the last try's
        'st() { i=$1; shift; n=0; while :; do "$@"; r=$?; case $r in '
        f'{codes}) if [ "$n" -lt {RETRIES} ]; then n=$((n + 1)); '
        "printf '\\nstream %s: rsync exit %s, starting it again (%s of "
        f"{RETRIES}"
        ')\\n\' "$i" "$r" "$n"; '
        "sleep 1; continue; fi;; esac; return $r; done; }",
    ]
    for i in range(1, p.count):
        lines.append(f"( st {i} {rsync(i)} > log.{i} 2>&1; echo $? > rc.{i} ) &")
        lines.append(f"p{i}=$!")
    lines.append(f"st 0 {rsync(0)}; r0=$?; echo $r0 > rc.0")
    for i in range(1, p.count):
        n_files, size = len(p.lists[i]), p.bytes[i]
        first = shlex.quote(p.lists[i][0] if p.lists[i] else "")
        lines.append(f"wait $p{i}; r{i}=$(cat rc.{i} 2>/dev/null || echo 1)")
        # a stream that fell short is named in the job's log, with its own last words
        lines.append(
            f'if [ "$r{i}" -ne 0 ]; then printf \'\\nstream {i} ({n_files} files, {size} bytes, from %s) failed: '
            f"rsync exit %s\\n' {first} \"$r{i}\"; tr '\\r' '\\n' < log.{i} | grep -v '^ *[0-9][0-9,.]* *[0-9]*%' "
            f"| grep . | tail -n 4 | sed 's/^/stream {i}: /'; fi"
        )
    return "\n".join(lines) + "\n" + _finish(p.count)


def _finish(k: int) -> str:
    # stream 0's status first, then the first extra stream that failed
    pick = "".join(f'[ "$rc" -ne 0 ] || rc=$r{i}; ' for i in range(1, k))
    return f'rc=$r0; {pick}exit "$rc"\n'


@dataclass
class StreamState:
    """One extra stream as a poll saw it: its latest update and its status once it ended."""

    index: int
    update: RsyncUpdate | None
    rc: int | None
    lines: list[str]


def parse_stream_line(line: str) -> StreamState | None:
    """`<i> <rc|-> <log tail with \\r and \\n as RS>` (remote.read_state / list_states)."""
    parts = line.split(" ", 2)
    if len(parts) < 2 or not parts[0].isdigit():
        return None
    rc = int(parts[1]) if parts[1].lstrip("-").isdigit() else None
    updates, lines = parse_log((parts[2] if len(parts) > 2 else "").replace(remote.RS, "\n"))
    return StreamState(int(parts[0]), updates[-1] if updates else None, rc, lines)


def combine(
    main: RsyncUpdate | None, others: list[StreamState], total_bytes: int | None, main_done: bool = False
) -> RsyncUpdate | None:
    """One update for the whole copy: bytes and files add up; the rate is that of the streams still
    running (a finished stream's last rate is its average, not what it sends now)."""
    ups = [main] + [s.update for s in others]
    have = [u for u in ups if u is not None]
    if not others or not have:
        return main
    nbytes = sum(u.bytes for u in have)
    running = [None if main_done else main] + [s.update for s in others if s.rc is None]
    rate = sum(u.rate for u in running if u is not None)
    pct = int(100 * nbytes / total_bytes) if total_bytes else min(u.percent for u in have)

    def add(attr: str) -> int | None:
        vals = [getattr(u, attr) for u in have]
        return None if any(v is None for v in vals) else sum(vals)

    left = add("files_left")
    eta = max(0.0, (total_bytes - nbytes) / rate) if total_bytes and rate > 0 else None
    return RsyncUpdate(
        nbytes,
        min(100, pct),
        rate,
        eta,
        None,
        add("files_done"),
        left,
        add("files_total"),
        any(u.listing for u in have),
    )


def stream_rows(main: RsyncUpdate | None, others: list[StreamState], main_done: bool) -> list[dict]:
    """Per-stream figures for the display: index, bytes, percent, rate, and whether it ended."""
    rows = [
        {
            "n": 0,
            "bytes": main.bytes if main else 0,
            "percent": main.percent if main else None,
            "rate": None if main_done or main is None else main.rate,
            "done": main_done,
        }
    ]
    for s in sorted(others, key=lambda s: s.index):
        u = s.update
        rows.append(
            {
                "n": s.index,
                "bytes": u.bytes if u else 0,
                "percent": u.percent if u else None,
                "rate": None if s.rc is not None or u is None else u.rate,
                "done": s.rc is not None,
                "rc": s.rc,
            }
        )
    return rows
