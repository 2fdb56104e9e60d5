"""Shell snippets the nodes run for transfers. POSIX sh only (nodes may lack bash); every value
that reaches the shell is quoted here.

A transfer lives in a state directory on its SOURCE node,
~/.local/state/sparktui/transfers/<id>/, so it survives sparktui exiting:
  meta.json  what it is (kind, source, dest, path or image, started, sizes)
  pid        the job's process id, which is also its process group (setsid)
  log        rsync / docker output (rsync progress is \\r-separated)
  count      image transfers: bytes through the pipe so far
  save_rc    image transfers: docker save's exit status
  rc         the job's exit status, written (atomically) when it ends
  cancelled  present once `sync cancel` stopped it
  verified   one JSON line written after verification

A destination's model directory holds MARKER from the moment a copy into it starts until the copy
is verified: probes, `check` and plans read it as "model incomplete", so a copy cut off by a dead
link or a full disk is never taken for the model. rsync neither sends nor deletes it.
"""

from __future__ import annotations

import json
import re
import shlex

from ..remote.procgroup import GROUP_ALIVE_FN

STATE_ROOT = ".local/state/sparktui/transfers"  # under $HOME of the source node's login
READ_CHUNK = 1 << 20  # most log bytes fetched per poll; a flood of errors is read over several polls
PRUNE_DAYS = 14  # a new transfer removes the state of transfers that ended longer ago
META_BYTES = 128 * 1024  # meta.json is written as one printf argument, which Linux caps at 128 KiB
TAIL_BYTES = 2000  # log tail shown by listings (last progress update, last error lines)
RS = "\x1e"  # stands in for \r and \n in a listing's log tail, so a record stays on one line

MARKER = ".sparktui-incomplete"  # in the model directory while a copy into it is unverified
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

# alive PID: the process exists and is not a zombie (containers often have no init reaping them).
# Builtins only (read, parameter expansion): a poll runs it every tick, and a fork per look adds up
# to a core's tenth on the sending node over a long copy. The state is the first word after the
# last ") " of /proc/PID/stat (a command name may hold ") " itself).
_ALIVE_FN = (
    'alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 1; '
    '[ -r "/proc/$1/stat" ] || return 0; '
    'read -r _l < "/proc/$1/stat" 2>/dev/null || return 0; _l=${_l##*) }; [ "${_l%% *}" != Z ]; }'
)


def check_id(tid: str) -> str:
    """Transfer ids become directory names: refuse anything that is not a plain name."""
    if not _ID.fullmatch(tid):
        raise ValueError(f"not a transfer id: {tid!r}")
    return tid


def home_word(path: str) -> str:
    """A shell word for `path`, expanding a leading ~/ to $HOME on the node that runs it."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def rsync_remote_path(path: str) -> str:
    """The destination path as rsync sends it: ~/x becomes x, which the remote side takes from $HOME."""
    if path == "~":
        return "."
    return path[2:] if path.startswith("~/") else path


def peer(user: str, addr: str) -> str:
    """user@addr as rsync wants it (an IPv6 address in brackets)."""
    return f"{user}@[{addr}]" if ":" in addr else f"{user}@{addr}"


def state_dir_word(tid: str) -> str:
    return f'"$HOME"/{STATE_ROOT}/{shlex.quote(check_id(tid))}'


def ssh_command(ssh: str, connect_timeout: int, ciphers: str | None = None) -> list[str]:
    """The ssh client the source node uses towards its peers: never prompts, notices a dead link.
    `ciphers` (a Ciphers list, see cipher.py) sets what a bulk copy encrypts with; compression
    stays off whatever an ssh_config says: weights do not compress and it would cost a core."""
    extra = ["-o", f"Ciphers={ciphers}", "-o", "Compression=no"] if ciphers else []
    return [
        *shlex.split(ssh),
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={int(connect_timeout)}",
        "-o",
        "ServerAliveInterval=15",
        "-o",
        "ServerAliveCountMax=4",
        *extra,
    ]


def trust_check(ssh: str, user: str, addr: str, connect_timeout: int = 5) -> str:
    """Can the node reach user@addr without any prompt? Prints ssh's complaint when not."""
    return shlex.join([*ssh_command(ssh, connect_timeout), f"{user}@{addr}", "true"])


def start_detached(tid: str, meta: dict, job: str, files: dict[str, str] | None = None) -> str:
    """Create the state directory, write meta.json and start `job` detached; prints its pid.

    setsid gives the job its own session and process group (so cancel can stop rsync, ssh and the
    pipe together), nohup and the redirections cut it from the SSH channel. The job runs in the
    state directory; its exit status lands in rc (through a rename, so a reader never sees half).
    `files` (name -> text) are written there first: the lists of a copy's parallel streams.
    """
    extra = "".join(
        f"printf '%s' {shlex.quote(text)} > {shlex.quote(check_id(name))}\n" for name, text in (files or {}).items()
    )
    # the job runs in a subshell so that even an `exit` in it leaves the status to record
    inner = f"echo $$ > pid; ( {job}\n); echo $? > rc.tmp; mv rc.tmp rc"
    return (
        "set -e\n"
        # ended transfers older than two weeks go; running, lost and recent ones stay listed
        f'find "$HOME"/{STATE_ROOT} -mindepth 2 -maxdepth 2 -name rc -mtime +{PRUNE_DAYS} 2>/dev/null '
        '| while read -r f; do rm -rf -- "${f%/rc}"; done\n'
        f"d={state_dir_word(tid)}\n"
        '[ ! -e "$d" ] || { echo "transfer directory exists: $d" >&2; exit 17; }\n'
        'mkdir -p "$d"\n'
        'cd "$d"\n'
        f"printf '%s\\n' {shlex.quote(json.dumps(meta, separators=(',', ':')))} > meta.json\n"
        f"{extra}"
        ": > log\n"
        f"setsid nohup sh -c {shlex.quote(inner)} </dev/null >log 2>&1 &\n"
        "echo $!\n"
    )


def rsync_job(
    src_path: str,
    user: str,
    addr: str,
    dest_path: str,
    ssh: str,
    connect_timeout: int,
    io_timeout: int = 300,
    bwlimit: str | None = None,
) -> str:
    """rsync from this node to user@addr; C locale keeps the progress numbers in one format. Links
    that leave the model directory (a Hugging Face snapshot's links into its blobs) arrive as the
    files they point to: the peer has no blobs for them to point at."""
    e = shlex.join(ssh_command(ssh, connect_timeout))
    src = home_word(src_path.rstrip("/") or "/") + "/"
    dst = f"{peer(user, addr)}:{rsync_remote_path(dest_path).rstrip('/')}/"
    limit = f"--bwlimit={shlex.quote(bwlimit)} " if bwlimit else ""
    return (
        f"LC_ALL=C rsync -a --copy-unsafe-links --partial --info=progress2 -s --timeout={int(io_timeout)} "
        f"--exclude=/{MARKER} {limit}"
        f"-e {shlex.quote(e)} {src} {shlex.quote(dst)}"
    )


# Copies stdin to stdout and keeps the byte count in ./count (rewritten atomically twice a second).
# python3 is on every DGX OS / Ubuntu node; where it is missing the pipe runs through cat and the
# transfer shows no byte progress, only its end.
COUNTER_PY = """import os, sys, time
i, o, n, t = sys.stdin.buffer, sys.stdout.buffer, 0, 0.0
def w():
    with open("count.tmp", "w") as f:
        f.write(str(n))
    os.replace("count.tmp", "count")
try:
    while True:
        b = i.read1(1 << 20)
        if not b:
            break
        o.write(b)
        n += len(b)
        if time.monotonic() - t > 0.5:
            w()
            t = time.monotonic()
    o.flush()
except BrokenPipeError:
    w()
    sys.exit(1)
w()
"""


def image_job(image: str, user: str, addr: str, ssh: str, connect_timeout: int) -> str:
    """docker save | count | ssh peer docker load; the job's status is load's, else save's."""
    remote = shlex.join([*ssh_command(ssh, connect_timeout), f"{user}@{addr}", "docker load"])
    return (
        f"if command -v python3 >/dev/null 2>&1; then c=python3; else c=cat; fi\n"
        f"{{ docker save {shlex.quote(image)}; echo $? > save_rc; }} | "
        f'if [ "$c" = python3 ]; then python3 -c {shlex.quote(COUNTER_PY)}; else cat; fi | {remote}\n'
        "r=$?; s=$(cat save_rc 2>/dev/null || echo 1)\n"
        '[ "$r" -ne 0 ] || r=$s\n'
        '(exit "$r")'
    )


def read_state(tid: str, offset: int, limit: int = READ_CHUNK, wait: float = 0.0) -> str:
    """One poll of a transfer: a header line, then log bytes [offset, offset+n).

    With `wait`, the node first waits up to that many seconds for something to tell (new log bytes,
    the end, the process gone), looking every 200 ms: the end of a copy is seen at once instead of
    at the next poll, progress comes at most once a second (rsync's own pace), and a quiet transfer
    costs one round trip per `wait`.
    rc is read before the log size, so when rc is there the bytes read are the whole log.
    Header: `rc=<code|> alive=<0|1> size=<log bytes> count=<bytes|> now=<epoch> cancelled=<0|1> n=<bytes sent>
    streams=<S> s0=<stream 0's status once it ended|>`, then S lines, one per extra stream of a parallel copy (STREAM_LINES).
    """
    off = int(offset)
    ticks = int(max(0.0, wait) * 5)
    return (
        f"{_ALIVE_FN}\n"
        f"d={state_dir_word(tid)}\n"
        'cd "$d" 2>/dev/null || { echo "no such transfer directory: $d" >&2; exit 3; }\n'
        # ticks of 0.2 s; the end (rc, the job gone) is looked for every tick with builtins, the log
        # size (a fork) every 5th: at least 1 s between answers while bytes flow (rsync prints
        # about once a second), the end answered within a tick
        # small files are read with the shell's own `read`: no fork per file
        'p=; read -r p 2>/dev/null < pid; size=$(wc -c < log | tr -d " ")\n'
        f'i=0; while [ "$i" -lt {ticks} ] && [ ! -f rc ] && alive "$p" && '
        f'{{ [ "$i" -lt 5 ] || [ "$size" -le {off} ]; }}; '
        "do if sleep 0.2 2>/dev/null; then i=$((i + 1)); else sleep 1; i=$((i + 5)); fi; "
        '[ $((i % 5)) -ne 0 ] || size=$(wc -c < log | tr -d " "); done\n'
        "rc=; [ ! -f rc ] || read -r rc 2>/dev/null < rc\n"
        'a=0; alive "$p" && a=1\n'
        "size=$(wc -c < log | tr -d ' ')\n"
        "count=; read -r count 2>/dev/null < count\n"
        "c=0; [ ! -e cancelled ] || c=1\n"
        "s0=; read -r s0 2>/dev/null < rc.0\n"
        f'n=$((size - {off})); [ "$n" -gt 0 ] || n=0; [ "$n" -le {int(limit)} ] || n={int(limit)}\n'
        's=0; for f in log.[0-9]*; do [ ! -f "$f" ] || s=$((s + 1)); done\n'
        'printf "rc=%s alive=%s size=%s count=%s now=%s cancelled=%s n=%s streams=%s s0=%s\\n" '
        '"$rc" "$a" "$size" "$count" "$(date +%s)" "$c" "$n" "$s" "$s0"\n'
        f"{STREAM_LINES}"
        f'[ "$n" -eq 0 ] || tail -c +{off + 1} log | head -c "$n"\n'
    )


# one line per extra stream of a parallel copy (log.<i>, rc.<i> in the state directory, run in it):
# `<i> <rc|-> <its log's last bytes, \r and \n as RS>`
STREAM_LINES = (
    'for f in log.[0-9]*; do [ -f "$f" ] || continue; i=${f#log.}; '
    'printf "%s %s %s\\n" "$i" "$(cat "rc.$i" 2>/dev/null || echo -)" '
    f"\"$(tail -c 400 \"$f\" | tr '\\r\\n' '{RS}{RS}')\"; done\n"
)


def list_states(tail_bytes: int = TAIL_BYTES) -> str:
    """Every transfer on this node, one record each:
    `@@ <id> rc=.. alive=.. cancelled=.. now=..` then `meta=<json>`, `verified=<json|>`,
    `tail=<last log bytes, \\r and \\n replaced by \\x1e>`, `count=<bytes|>`."""
    return (
        f"{_ALIVE_FN}\n"
        f'root="$HOME"/{STATE_ROOT}\n'
        '[ -d "$root" ] || exit 0\n'
        "now=$(date +%s)\n"
        'for d in "$root"/*; do\n'
        '  [ -f "$d/meta.json" ] || continue\n'
        '  rc=; [ ! -f "$d/rc" ] || rc=$(head -c 32 "$d/rc")\n'
        '  a=0; alive "$(cat "$d/pid" 2>/dev/null)" && a=1\n'
        '  c=0; [ ! -e "$d/cancelled" ] || c=1\n'
        '  printf "@@ %s rc=%s alive=%s cancelled=%s now=%s\\n" "${d##*/}" "$rc" "$a" "$c" "$now"\n'
        # capped: a damaged or planted file is read as far as a real one goes, never whole
        f'  printf "meta=%s\\n" "$(head -c {META_BYTES} "$d/meta.json" | head -n 1)"\n'
        f'  printf "verified=%s\\n" "$(head -c {META_BYTES} "$d/verified" 2>/dev/null | head -n 1)"\n'
        '  printf "count=%s\\n" "$(head -c 32 "$d/count" 2>/dev/null)"\n'
        f"  printf 'tail=%s\\n' \"$(tail -c {int(tail_bytes)} \"$d/log\" 2>/dev/null | tr '\\r\\n' '{RS}{RS}')\"\n"
        f'  ( cd "$d" && {STREAM_LINES.strip()} ) | sed "s/^/stream=/"\n'
        "done\n"
    )


def cancel(tid: str, grace: int = 10) -> str:
    """Mark the transfer cancelled and stop its whole process group; partial files stay for a resume.

    Prints `finished` when it had already ended, `stopped` otherwise. dash's kill takes no `--`,
    so the group is named as `-PGID` right after the signal.
    """
    return (
        f"{GROUP_ALIVE_FN}\n"
        f"d={state_dir_word(tid)}\n"
        'cd "$d" 2>/dev/null || { echo "no such transfer directory: $d" >&2; exit 3; }\n'
        "if [ -f rc ]; then echo finished; exit 0; fi\n"
        ": > cancelled\n"
        "g=$(cat pid 2>/dev/null)\n"
        'if [ -z "$g" ]; then echo stopped; exit 0; fi\n'
        'kill -TERM -"$g" 2>/dev/null || kill -TERM "$g" 2>/dev/null\n'
        # rsync needs a moment after TERM to keep the partial file; only stragglers get KILL
        f'i=0; while galive && [ "$i" -lt {int(grace) * 5} ]; do sleep 0.2 2>/dev/null || sleep 1; i=$((i + 1)); done\n'
        'kill -KILL -"$g" 2>/dev/null\n'
        "echo stopped\n"
    )


def write_verified(tid: str, result: dict) -> str:
    return (
        f"d={state_dir_word(tid)}\n"
        f"printf '%s\\n' {shlex.quote(json.dumps(result, separators=(',', ':')))} > \"$d/verified.tmp\" "
        '&& mv "$d/verified.tmp" "$d/verified"\n'
    )


def remove_state(tid: str) -> str:
    return f"rm -rf -- {state_dir_word(tid)}\n"


def file_list(path: str) -> str:
    """Every regular file of a directory tree with its size, or exit 3 when it is not there.

    Output: `links=N`, then `incomplete=<MARKER's first line, or nothing>`, then `SIZE NAME` records
    each ended by a NUL (a name may hold a newline). MARKER itself is left out. Links are followed
    (a Hugging Face snapshot is links into its blobs), so a dangling one counts as a missing file. GNU find prints
    sizes itself; elsewhere wc -c per file (slower, same numbers).
    """
    return (
        f"p={home_word(path)}\n"
        '[ -d "$p" ] || { echo "missing: $p" >&2; exit 3; }\n'
        'cd "$p" || exit 3\n'
        "l=$(find . -type l -exec sh -c 'echo $#' sh {} + | awk '{s+=$1} END {print s+0}')\n"
        'printf "links=%s\\n" "$l"\n'
        f"m=; [ ! -f {MARKER} ] || m=$(head -n 1 {MARKER} | head -c 500)\n"
        'printf "incomplete=%s\\n" "$m"\n'
        "if find . -maxdepth 0 -printf '' >/dev/null 2>&1; then\n"
        f"  find -L . -type f ! -path ./{MARKER} -printf '%s %P\\0'\n"
        "else\n"
        f"  find -L . -type f ! -path ./{MARKER} -exec sh -c "
        '\'for f; do printf "%s %s\\0" "$(wc -c < "$f" | tr -d " ")" "${f#./}"; done\' sh {} +\n'
        "fi\n"
    )


def mark_incomplete(path: str, note: str) -> str:
    """Create the model directory and put MARKER in it (before any byte of a copy lands there)."""
    d = home_word(path)
    return (
        f"mkdir -p -- {d} && printf '%s\\n' {shlex.quote(note)} > {d}/{MARKER}.tmp "
        f"&& mv -f {d}/{MARKER}.tmp {d}/{MARKER}\n"
    )


def mark_complete(path: str) -> str:
    """Remove MARKER once the copy is verified."""
    return f"rm -f -- {home_word(path)}/{MARKER}\n"


def free_space(path: str) -> str:
    """`avail=<bytes> at=<dir>` for the filesystem that holds (or would hold) path."""
    return (
        f"p={home_word(path)}\n"
        'while [ ! -d "$p" ] && [ "$p" != / ] && [ -n "$p" ]; do p=$(dirname "$p"); done\n'
        "a=$(df -Pk \"$p\" | awk 'NR==2 {print $4}')\n"
        'printf "avail=%s at=%s\\n" "$((a * 1024))" "$p"\n'
    )


def make_dir(path: str) -> str:
    return f"mkdir -p -- {home_word(path)}\n"


def whoami() -> str:
    return "id -un\n"


def has_command(name: str) -> str:
    """Exit 0 when name runs here, 1 with nothing on stderr when it is not found; a failure of the
    shell itself leaves its own words on stderr (the path found goes to stdout, unread)."""
    return f"command -v {shlex.quote(name)}\n"


def checksum_dry_run(src_path: str, user: str, addr: str, dest_path: str, ssh: str, connect_timeout: int) -> str:
    """Compare contents by checksum without changing anything: one itemized line per difference."""
    e = shlex.join(ssh_command(ssh, connect_timeout))
    src = home_word(src_path.rstrip("/") or "/") + "/"
    dst = f"{peer(user, addr)}:{rsync_remote_path(dest_path).rstrip('/')}/"
    return (
        f"LC_ALL=C rsync -a --copy-unsafe-links --checksum --dry-run -s --exclude=/{MARKER} --out-format='%i %n' "
        f"-e {shlex.quote(e)} {src} {shlex.quote(dst)}\n"
    )


def image_id(image: str) -> str:
    return f"docker image inspect --format '{{{{.Id}}}} {{{{.Size}}}}' {shlex.quote(image)}\n"
