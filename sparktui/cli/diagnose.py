"""`sparktui diagnose`: read an engine log (a file or stdin) and say how far it got and what went wrong."""
from __future__ import annotations

import argparse
import sys
from typing import IO, Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..core.diagnose import Diagnoser
from ..core.engines.logsigns import READY
from .common import CliExit, console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="read an engine log and list milestones and problems with hints")
    p.add_argument("file", nargs="?", default="-", metavar="FILE|-", help="log file (default: - for stdin)")
    p.add_argument("--engine", choices=sorted(READY), help="engine that wrote the log (default: guessed)")
    p.add_argument("--hang-after", type=float, default=90.0, metavar="S",
                   help="seconds of silence in distributed init that count as a hang (docker -t timestamps)")
    p.add_argument("--model-path", help="the model path, to recognise it in file-not-found errors")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=cmd_diagnose)


def guess_engine(lines: list[str]) -> str | None:
    for line in lines[:400]:
        low = line.lower()
        if "sglang" in low:
            return "sglang"
        if "vllm" in low or "ray runtime started" in low:
            return "vllm"
    return None


def diagnose_lines(lines: Iterable[str], engine: str, hang_after: float = 90.0,
                   model_path: str | None = None) -> Diagnoser:
    d = Diagnoser(engine, hang_after=hang_after, model_path=model_path)
    for line in lines:
        d.feed(line)
    d.finish()
    return d


def _open(name: str) -> IO[str]:
    if name == "-":
        return sys.stdin
    try:
        return open(name, encoding="utf-8", errors="replace")
    except OSError as e:
        raise CliExit(2, f"{name}: {e.strerror or e}") from None


def cmd_diagnose(args: argparse.Namespace) -> int:
    f = _open(args.file)
    try:
        lines = f.read().splitlines()
    finally:
        if f is not sys.stdin:
            f.close()
    engine = args.engine or guess_engine(lines)
    if engine is None:
        raise CliExit(2, "cannot tell which engine wrote this log: pass --engine sglang or --engine vllm")
    d = diagnose_lines(lines, engine, args.hang_after, args.model_path)
    if args.json:
        print_json(d.to_json())
    else:
        console.print(render_diagnosis(d))
    return 1 if d.problems else 0


def _detail(m: dict) -> str:
    skip = {"kind", "line", "node", "at", "text"}
    return ", ".join(f"{k}={v}" for k, v in m.items() if k not in skip)


def render_diagnosis(d: Diagnoser) -> Group:
    data = d.to_json()
    colour = {"ready": "green", "failed": "red", "hung": "red"}.get(data["state"], "yellow")
    parts: list = [Text.assemble(("state ", "bold"), (data["state"], f"bold {colour}"), f"  ({d.engine})")]
    if data["milestones"]:
        t = Table(title="milestones", title_justify="left", show_edge=False)
        for col in ("line", "node", "milestone", "detail"):
            t.add_column(col)
        for m in data["milestones"]:
            t.add_row(str(m["line"]), m["node"] or "", m["kind"], _detail(m))
        parts.append(t)
    for p in data["problems"]:
        where = f"line {p['line']}" + (f" on {p['node']}" if p["node"] else "")
        parts.append(Text.assemble((f"{p['kind']}", "bold red"), f" ({where}): {p['message']}"))
        parts.append(Text("  hint: " + p["hint"], style="yellow"))
    if not data["problems"]:
        parts.append(Text("no problems found", style="green"))
    return Group(*parts)
