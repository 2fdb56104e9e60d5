"""Diagnose a saved log in bounded memory, close to the speed of reading it.

The file is read in binary chunks and decoded line by line with replacement, so any bytes
(a log cut mid-character, another encoding) read the same from a file or from stdin. A long log
is long because it serves: once the engine serves and nothing is in doubt, a chunk made only of
serving lines (request and throughput lines) changes nothing but the line count, so it is
counted in C (bytes.count) instead of being parsed line by line.

What `sparktui logs` prints (`NODE │ line`, every node's lines in one file) is read per node: each
node's silence and phases are its own, and a problem names the node it came from.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator

from .diagnose import Diagnoser
from ..engines import ENGINES

CHUNK = 256 << 10  # fits the CPU caches: counting runs fastest at this size
MAX_LINE = 1 << 20  # a longer "line" is cut there (binary junk must not grow memory)
GUESS_BYTES = 1 << 20  # how much of the start is kept to guess the engine
NODE_MARK = " \u2502 ".encode()  # `sparktui logs` writes "NODE │ line"
NODE_NAME_MAX = 64
# Serving lines: one of these per line, and nothing else on such a line is ever a problem.
SERVING = (
    b"Avg prompt throughput:",
    b'HTTP/1.1" 200',
    b"] Decode batch.",
    b"] Prefill batch.",
    b"] Decode batch,",
    b"] Prefill batch,",
)  # SGLang 0.5 writes a comma where 0.4 wrote a full stop


# Text of the layers under both engines: a log of only these is read with the shared rules.
NEUTRAL = ("nccl", "torch", "c10d", "gloo", "[rank", "ray", "traceback", "cuda")
_NEUTRAL_READER = next((e.name for e in ENGINES.values() if e.reads_neutral_logs), None)


def guess_engine(text: str) -> str | None:
    """The engine whose words (Engine.log_words) a line names first; a log of only the layers under every
    engine goes to the engine whose rule set holds the engine-neutral signatures (Engine.reads_neutral_logs)."""
    neutral = False
    for line in text.splitlines()[:400]:
        low = line.lower()
        for e in ENGINES.values():
            if any(w in low for w in e.log_words):
                return e.name
        neutral = neutral or any(w in low for w in NEUTRAL)
    return _NEUTRAL_READER if neutral else None


def _chunks(stream: BinaryIO, first: bytes) -> Iterator[bytes]:
    if first:
        yield first
    while True:
        b = stream.read(CHUNK)
        if not b:
            return
        yield b


def _all_serving(buf: bytes, end: int, order: list[bytes]) -> int:
    """The number of lines in buf[:end] if every one is a serving line (one template each), else 0.

    Counts in C. buf[end:] holds no newline (end follows the last one), so the newlines of the
    whole buffer are those of buf[:end]; replace() finds them with memchr, twice as fast as count().
    """
    want = len(buf) - len(buf.replace(b"\n", b""))
    seen = 0
    for i, t in enumerate(order):
        seen += buf.count(t, 0, end)
        if seen >= want:
            if i:  # the most frequent template first next time: usually one or two passes
                order.insert(0, order.pop(i))
            break
    return want if seen == want else 0


def read_head(stream: BinaryIO) -> bytes:
    """The first part of the stream, kept to guess the engine (stdin cannot be read twice)."""
    head = stream.read(GUESS_BYTES)
    return head or b""


def node_prefixed(head: bytes) -> bool:
    """Whether the log is `sparktui logs` output: its first line starts with a node's name and " │ "."""
    return split_node(head.split(b"\n", 1)[0])[0] is not None


def split_node(line: bytes) -> tuple[str | None, bytes]:
    """(node, its line) for a "NODE │ line" line; (None, line) for any other."""
    name, mark, rest = line.partition(NODE_MARK)
    if mark and 0 < len(name) <= NODE_NAME_MAX and b" " not in name:
        return name.decode("utf-8", "replace"), rest
    return None, line


def _feed(d: Diagnoser, line: bytes, prefixed: bool) -> None:
    node, line = split_node(line) if prefixed else (None, line)
    d.feed(line.decode("utf-8", "replace"), node=node)


def diagnose_stream(stream: BinaryIO, d: Diagnoser, head: bytes = b"") -> Diagnoser:
    tail = b""
    prefixed = None
    order = list(SERVING)
    for chunk in _chunks(stream, head):
        buf = tail + chunk if tail else chunk
        if prefixed is None:
            prefixed = node_prefixed(buf)
        cut = buf.rfind(b"\n")
        if cut < 0:
            tail = buf if len(buf) < MAX_LINE else _feed_line(d, buf, prefixed)
            continue
        n = _all_serving(buf, cut + 1, order) if d.quiet_serving else 0
        if n:
            last = buf[buf.rfind(b"\n", 0, cut) + 1 : cut]
            d.skip(n, last.decode("utf-8", "replace"))
            tail = buf[cut + 1 :]
            continue
        body, tail = buf[: cut + 1], buf[cut + 1 :]
        for line in body.split(b"\n")[:-1]:
            if len(line) > MAX_LINE:
                line = line[:MAX_LINE]
            if d.quiet_serving and any(t in line for t in SERVING):
                d.skip(1, line.decode("utf-8", "replace"))
            else:
                _feed(d, line, prefixed)
    if tail:
        _feed(d, tail, bool(prefixed))
    d.finish()
    return d


def _feed_line(d: Diagnoser, buf: bytes, prefixed: bool) -> bytes:
    _feed(d, buf[:MAX_LINE], prefixed)
    return b""
