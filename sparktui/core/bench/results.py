"""Benchmark rows: one per concurrency, read from the client's own result file (`--save-result`), and the
local history of them, $XDG_STATE_HOME/sparktui/bench.jsonl (one row a line), read back through
statefile's validated loader: a damaged line is skipped and said once, the others stay.

Keys of vllm bench serve's result (vllm/benchmarks/serve.py, 0.11.0 and 0.33.0): completed, failed,
duration, request_throughput, output_throughput, median_ttft_ms, p99_ttft_ms, median_itl_ms (p{N}_ kept
for each --metric-percentiles value).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..state import statefile

MAX_LINE = 64 * 1024  # a row is some 400 bytes; a longer line is damage
STARTED = (0.0, 1e11)  # unix times a row can hold (time.localtime refuses far beyond)
FIX = "remove the line (or the file) to start the history again"
ROW_FIX = "the client wrote no usable result; its log is in ~/.local/state/sparktui/bench/<id>/log on the head"


@dataclass
class Row:
    deployment: str
    engine: str
    image: str  # the engine's image (its release), "" when the record does not say
    plan_id: str
    concurrency: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    output_tokens_per_s: float
    requests_per_s: float
    completed: int
    failed: int = 0
    input_len: int = 0
    output_len: int = 0
    mode: str = ""
    tp: int = 0
    client: str = "vllm bench serve"
    started: float = 0.0
    tainted: str = ""  # why the run did not measure the deployment alone (taint.py); never compared when set

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.deployment, self.engine, self.image, self.plan_id)


@dataclass
class _ClientResult:
    """The part of the client's result file sparktui reads, each field type-checked."""

    completed: int
    request_throughput: float
    output_throughput: float
    median_ttft_ms: float
    p99_ttft_ms: float
    median_itl_ms: float
    failed: int = 0
    max_concurrency: int | None = None


def from_client(text: str, where: str, **ctx) -> Row:
    """A Row from one result file of `vllm bench serve`; StateFileError when it is not one."""
    r = statefile.load(_ClientResult, statefile.parse_json(text, where, ROW_FIX), where, ROW_FIX)
    if r.completed < 1:
        raise statefile.StateFileError(where, f"no request completed ({r.failed} failed)", ROW_FIX)
    c = ctx.pop("concurrency", r.max_concurrency)
    return Row(
        concurrency=int(c or 0),
        ttft_p50_ms=r.median_ttft_ms,
        ttft_p99_ms=r.p99_ttft_ms,
        itl_p50_ms=r.median_itl_ms,
        output_tokens_per_s=r.output_throughput,
        requests_per_s=r.request_throughput,
        completed=r.completed,
        failed=r.failed,
        **ctx,
    )


def history_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "sparktui" / "bench.jsonl"


ROTATE_BYTES = 4 << 20  # past this the file becomes bench.jsonl.1 (the one before is dropped): thousands of runs
LAST_RUNS = 200  # what a reader takes by default, newest first: bounded whatever the file's size
_BLOCK = 1 << 16


def rotated(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def append(rows: list[Row], path: Path | None = None, rotate_bytes: int = ROTATE_BYTES) -> None:
    """Add rows to the history (0600; a line each, so a cut-off write loses at most its own line); a file past
    rotate_bytes moves to bench.jsonl.1 (rename: atomic, and a writer still holding it writes there)."""
    path = path or history_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    statefile.append_lines(path, "".join(statefile.dumps(r.to_json(), sort_keys=True) + "\n" for r in rows).encode())
    if path.stat().st_size > rotate_bytes:
        os.replace(path, rotated(path))


def _backwards(path: Path):
    """(index from the end, line) from the last line to the first, read a block at a time from the end: memory
    is a block and a line whatever the size. An over-long line comes as None."""
    with open(path, "rb") as f:
        pos, rest, k, long = f.seek(0, os.SEEK_END), b"", 0, False
        while pos > 0:
            n = min(_BLOCK, pos)
            pos -= n
            f.seek(pos)
            parts = (f.read(n) + rest).split(b"\n")
            rest = parts.pop(0)
            for part in reversed(parts):
                yield k, None if long else part
                k, long = k + 1, False
            if len(rest) > MAX_LINE:
                rest, long = b"", True
        yield k, None if long else rest


def _line_count(path: Path) -> int:
    n = 1
    with open(path, "rb") as f:
        while chunk := f.read(_BLOCK):
            n += chunk.count(b"\n")
    return n


def _row(raw: bytes | None, where: str) -> Row:
    if raw is None:
        raise statefile.StateFileError(where, f"a line longer than {MAX_LINE} bytes", FIX)
    return statefile.load(
        Row,
        statefile.parse_json(raw.decode("utf-8", "replace"), where, FIX),
        where,
        FIX,
        ranges={"concurrency": (1, 1 << 20), "started": STARTED},
    )


def load(path: Path | None = None, last: int = LAST_RUNS, deployment: str | None = None) -> tuple[list[Row], list[str]]:
    """(rows, problems): the usable rows of the `last` runs (of `deployment`, when given), oldest first, read
    from the end of the file and then of its rotated predecessor; one line per damaged line skipped."""
    path = path or history_path()
    rows: list[Row] = []
    problems: list[str] = []
    seen: set[tuple] = set()
    for p in (path, rotated(path)):
        if len(seen) > last:
            break
        try:
            total = None
            for k, raw in _backwards(p):
                if raw is not None and not raw.strip():
                    continue
                try:
                    r = _row(raw, str(p))
                except statefile.StateFileError:
                    total = total or _line_count(p)  # counted only when a line is damaged: it names the line
                    try:
                        _row(raw, f"{p}:{total - k}")
                    except statefile.StateFileError as e:
                        problems.append(e.line())
                    continue
                if deployment is not None and r.deployment != deployment:
                    continue
                seen.add((*r.key, r.started))
                if len(seen) > last:
                    break
                rows.append(r)
        except FileNotFoundError:
            continue
        except OSError as e:
            problems.append(f"{p}: cannot be read ({e.strerror or e}); {FIX}")
    rows.reverse()
    problems.reverse()
    if len(problems) > 1:
        problems = [problems[0] + f" (and {len(problems) - 1} more damaged lines skipped)"]
    return rows, problems


def runs(rows: list[Row]) -> list[list[Row]]:
    """Rows grouped by run (deployment, engine, image, plan and start time), oldest run first."""
    out: dict[tuple, list[Row]] = {}
    for r in rows:
        out.setdefault((*r.key, r.started), []).append(r)
    return [sorted(v, key=lambda r: r.concurrency) for v in out.values()]


def beside(rows: list[Row], deployment: str) -> tuple[list[Row], list[Row]]:
    """(latest run, the previous engine's latest clean run) of a deployment: after a pivot both are shown.
    A tainted run is set beside nothing."""
    mine = [g for g in runs(rows) if g[0].deployment == deployment]
    if not mine:
        return [], []
    latest = mine[-1]
    if latest[0].tainted:
        return latest, []
    other = next((g for g in reversed(mine[:-1]) if g[0].engine != latest[0].engine and not g[0].tainted), [])
    return latest, other


def now() -> float:
    return time.time()
