"""`sparktui diagnose`: read an engine log (a file or stdin) and say how far it got and what went wrong."""

from __future__ import annotations

import argparse
import io
import math
import sys
from typing import BinaryIO, Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..core.diagnosis.diagnose import Diagnoser
from ..core.engines import ENGINES
from ..core.diagnosis.logfile import diagnose_stream, guess_engine, read_head
from ..core.diagnosis.phases import PHASES
from ..core.state.states import Phase, State
from ..core.state.words import milestone_words, phase_words, problem_words
from ..core.config.secrets import mask_data
from .common import CliExit, console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="read an engine log and list milestones and problems with hints")
    p.add_argument("file", nargs="?", default="-", metavar="FILE|-", help="log file (default: - for stdin)")
    p.add_argument("--engine", choices=sorted(ENGINES), help="engine that wrote the log (default: guessed)")
    p.add_argument(
        "--hang-after",
        type=str,
        default="90",
        metavar="S",
        help="seconds of silence in distributed/NCCL init that count as a hang (docker -t timestamps)",
    )
    p.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="PHASE=S",
        help=f"seconds of silence allowed in a phase ({', '.join(PHASES)}); repeatable",
    )
    p.add_argument("--model-path", help="the model path, to recognise it in file-not-found errors")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=cmd_diagnose)


def _seconds(what: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not math.isfinite(v) or v <= 0:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise CliExit(2, f"{what}: expected a positive number of seconds, got {shown!r}")
    return v


def _limits(items: list[str]) -> dict[Phase, float]:
    out: dict[Phase, float] = {}
    for item in items:
        phase, sep, value = item.partition("=")
        if not sep or phase not in PHASES:
            raise CliExit(
                2, f"--limit: expected PHASE=SECONDS with PHASE one of {', '.join(PHASES)}, got {item[:60]!r}"
            )
        out[Phase(phase)] = _seconds(f"--limit {phase}", value)
    return out


def diagnose_lines(
    lines: Iterable[str], engine: str, hang_after: float = 90.0, model_path: str | None = None
) -> Diagnoser:
    d = Diagnoser(engine, hang_after=hang_after, model_path=model_path)
    for line in lines:
        d.feed(line)
    d.finish()
    return d


def _open(name: str) -> BinaryIO:
    if name == "-":
        return sys.stdin.buffer if hasattr(sys.stdin, "buffer") else io.BytesIO(sys.stdin.read().encode())
    try:
        return open(name, "rb")
    except OSError as e:
        raise CliExit(2, f"{name}: {e.strerror or e}") from None


def cmd_diagnose(args: argparse.Namespace) -> int:
    hang_after = _seconds("--hang-after", args.hang_after)
    limits = _limits(args.limit)
    f = _open(args.file)
    try:
        try:
            head = read_head(f)
        except OSError as e:
            raise CliExit(2, f"{args.file}: {e.strerror or e}") from None
        engine = args.engine or guess_engine(head.decode("utf-8", "replace"))
        if engine is None:
            raise CliExit(
                2,
                "cannot tell which engine wrote this log: pass "
                + " or ".join(f"--engine {e}" for e in sorted(ENGINES)),
            )
        d = Diagnoser(engine, hang_after=hang_after, model_path=args.model_path, limits=limits)
        diagnose_stream(f, d, head)
    finally:
        if args.file != "-":
            f.close()
    if args.json:
        print_json(mask_data(d.to_json()))  # quoted log lines may carry a secret the engine echoed
    else:
        console.print(render_diagnosis(d))
    return 1 if d.problems and d.state != State.READY else 0  # doubts while serving (a soft watchdog) are not failures


def _data(m: dict) -> dict:
    """A milestone's own data, from its JSON (where it sits beside the kind, line, node, time and text)."""
    return {k: v for k, v in m.items() if k not in ("kind", "line", "node", "at", "text")}


def _detail(m: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in _data(m).items())


def render_diagnosis(d: Diagnoser) -> Group:
    data = mask_data(d.to_json())
    colour = {State.READY: "green", State.FAILED: "red", State.HUNG: "red", State.WEDGED: "red"}.get(
        data["state"], "yellow"
    )
    parts: list = [Text.assemble(("state ", "bold"), (data["state"], f"bold {colour}"), f"  ({d.engine})")]
    if data["milestones"]:
        t = Table(title="milestones", title_justify="left", show_edge=False)
        for col in ("line", "node", "milestone", "detail"):
            t.add_column(col)
        for m in data["milestones"]:
            t.add_row(str(m["line"]), m["node"] or "", milestone_words(m["kind"], _data(m)), _detail(m))
        parts.append(t)
    for n in data["nodes"]:
        if n["phase"] and not data["ready"]:
            rank = f" rank {n['rank']}" if n["rank"] is not None else ""
            last = n["last_line"]
            parts.append(
                Text(
                    f"{n['node'] or 'log'}: reached {phase_words(n['phase'])}{rank}; last line {last['line']}: "
                    f"{last['text'][:120]}",
                    style="dim",
                )
            )
    for p in data["problems"]:
        where = f"line {p['line']}" + (f" on {p['node']}" if p["node"] else "")
        parts.append(Text.assemble((problem_words(p["kind"]), "bold red"), f" ({where}): {p['message']}"))
        parts.append(Text("  hint: " + p["hint"], style="yellow"))
    if not data["problems"]:
        parts.append(Text("no problems found", style="green"))
    return Group(*parts)
