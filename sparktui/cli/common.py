"""Pieces every CLI command shares: config loading with clean errors, JSON output, the journal."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ..core.config.config import Config
    from ..core.state.journal import Journal

console: "Console"  # made on first use (see __getattr__): `--version` needs no rich
err_console: "Console"


def __getattr__(name: str):
    if name in ("console", "err_console"):
        if name in globals():
            return globals()[name]
        from rich.console import Console

        stderr = name == "err_console"
        made = Console(stderr=stderr, highlight=False)
        if not made.is_terminal and not os.environ.get("COLUMNS"):  # rich would hard-wrap at 80 columns
            made = Console(stderr=stderr, highlight=False, soft_wrap=True, width=PIPE_WIDTH)
        globals()[name] = made
        return made
    raise AttributeError(name)


# Piped, lines end where sparktui ends them: prose is never wrapped (soft_wrap) and tables take their
# natural width up to this. COLUMNS, when set, is a width asked for: it still decides.
PIPE_WIDTH = 400


class CliExit(Exception):
    """Stop the command with an exit code after printing `message` to stderr (and, under --json, the
    error document on stdout: `reason` and `fix` fill its fields when the message alone does not)."""

    def __init__(self, code: int, message: str = "", *, reason: str | None = None, fix: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.fix = fix


json_written = False  # a JSON document went to stdout: an error after it is said on stderr alone
held: list[Any] | None = None  # while main runs a --json command: its document, written when it ends


def error_document(
    code: int, message: str, reason: str | None = None, fix: str | None = None, command: str | None = None
) -> dict:
    """What `--json` prints on stdout when a command refuses or fails: one JSON object.

    error: the first line of the message (what went wrong); reason: why, when something says more than the
    error (the message's further lines, the cause the command gave); fix: a concrete way out, when one is
    known. reason and fix are left out rather than repeating the error or saying nothing new.
    """
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()] or [f"exit {code}"]
    error, rest = lines[0], " ".join(lines[1:])
    why, way_out = _dial_words(message)
    reason = reason or rest or why
    if fix is None:
        from ..core.state.statefile import fix_in

        fix = fix_in(message) or way_out
    if fix is None and code == 2:
        fix = _choice_fix(error)
    return _fields(error, reason, fix) | {"exit": code}


def _fields(error: str, reason: str | None, fix: str | None) -> dict:
    doc = {"error": error}
    if reason and reason.strip() != error:
        doc["reason"] = reason
    if fix:
        doc["fix"] = fix
    return doc


def _dial_words(text: str) -> tuple[str | None, str | None]:
    """Why a node was not reached and the way out, when `text` says one was not."""
    from ..core.remote.reach import why_unreachable

    return why_unreachable([text])


# argparse's refusal as _Parser words it: `argument --mode: invalid choice: 'rey'; did you mean 'ray'?`
_CHOICE = re.compile(r"argument (\S+?)(?:/\S+)?: invalid choice: '.*'; did you mean '([^']*)'\?")


def _choice_fix(error: str) -> str | None:
    m = _CHOICE.match(error)
    if not m:
        return None
    opt, choice = m.groups()
    return f"pass {opt} {choice}" if opt.startswith("-") else f"use '{choice}'"


def checked(fn, *extra):
    """An argparse type from a core.argcheck check: its sentence (the value shortened) is the error, exit 2."""

    def conv(value: str):
        try:
            return fn(value, *extra)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    conv.__name__ = fn.__name__
    return conv


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="config file (default: $SPARKTUI_CONFIG, ./sparktui.yaml, ~/.config/sparktui/config.yaml)",
    )


def add_json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def get_config(args: argparse.Namespace) -> Config:
    """The config named by --config (or found), or exit 2 with FILE:LINE:COL: message."""
    from ..core.config.config import ConfigError, find_config, load_config

    try:
        return load_config(find_config(getattr(args, "config", None)))
    except ConfigError as e:
        raise CliExit(2, str(e)) from None


def journal() -> Journal:
    from ..core.state.journal import Journal, default_journal_path

    return Journal(default_journal_path(), on_problem=_journal_problem)


def _journal_problem(msg: str) -> None:
    """Said once on stderr: a command that ran but is missing from `sparktui journal` would mislead."""
    __getattr__("err_console").print(f"warning: {msg}", markup=False, soft_wrap=True)


def print_json(data: Any) -> None:
    """The command's JSON document; under main it is held until the exit code is known (see release)."""
    global json_written
    json_written = True
    if held is not None:
        held.append(data)
        return
    _write(data)


def _write(data: Any) -> None:
    try:
        text = json.dumps(data, indent=2, default=str, allow_nan=False)
    except ValueError:  # NaN or Infinity somewhere: JSON has no such numbers, null says "not known"
        text = json.dumps(_finite(data), indent=2, default=str, allow_nan=False)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if data == data and data not in (float("inf"), float("-inf")) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    return data


def release(code: int, command: str | None) -> None:
    """Write the held document: a command that exits non-zero gets `error`, and `reason` and `fix` where
    they say more, beside its own fields (taken from its errors, its unreachable nodes), so every refusal
    reads the same."""
    global held
    docs, held = held or [], None
    for data in docs:
        if code != 0 and isinstance(data, dict) and not {"error", "reason", "fix"} <= set(data):
            data = {**problem_fields(data, code, command), **data}
        _write(data)


def problem_fields(doc: dict, code: int, command: str | None) -> dict:
    """error / reason / fix for a result document that ended in exit `code`, from what it holds."""
    said = [str(doc[k]) for k in ("error", "message") if isinstance(doc.get(k), str) and doc[k]]
    if not said and isinstance(doc.get("reason"), str) and doc["reason"]:
        said = [doc["reason"]]  # the document's own verdict names the failing node; its list of nodes may not
    said += [str(e) for e in doc.get("errors") or [] if isinstance(doc.get("errors"), list)]
    raw = doc.get("unreachable")
    if isinstance(raw, dict):
        down = [f"{k}: {v}" for k, v in raw.items()]
    else:
        down = [str(x) for x in raw] if isinstance(raw, list) else []
    down += [
        str(n.get("error") or n.get("name") or n.get("node"))
        for n in doc.get("nodes") or []
        if isinstance(n, dict) and (n.get("reachable") is False or n.get("ok") is False)
    ]
    said += [f"{f} failed" for f in doc.get("failed") or [] if isinstance(doc.get("failed"), list)]
    fix = doc.get("fix") if isinstance(doc.get("fix"), str) else None
    for part in doc.values():  # a check's own verdict inside the document (launch's "preflight")
        if isinstance(part, dict) and not said:
            said += [part[k] for k in ("error", "reason") if isinstance(part.get(k), str) and part[k]][:1]
            fix = fix or (part["fix"] if isinstance(part.get("fix"), str) else None)
    if said and fix is None:
        from ..core.state.statefile import fix_in

        fix = next((f for f in map(fix_in, said) if f), None)  # a damaged state file's way out
    why, way_out = _dial_words("; ".join(said + down))
    if down and not said:
        said = [f"unreachable: {'; '.join(str(d) for d in down)}"]
    reason = "; ".join(said[1:]) or why
    if down and not way_out:  # a cause without known words: still a thing to do
        way_out = "bring the node(s) up or correct their address in the config"
    return _fields(said[0] if said else f"{command or 'the command'} exited {code}", reason, fix or way_out)


def confirm(question: str, assume_yes: bool) -> bool:
    """Ask on the terminal (y or yes goes ahead, anything else is no); refuse (False) when there is no
    terminal to ask on: the caller's refusal says to pass --yes."""
    if assume_yes:
        return True
    if not sys.stdin.isatty():  # the question still says what would have been done
        __getattr__("err_console").print(f"{question} — no terminal to ask on", markup=False)
        return False
    from rich.text import Text

    # a Text, not a markup string: rich would read "[y/N]" as a style tag and print nothing of it
    return __getattr__("console").input(Text(f"{question} [y/N] ")).strip().lower() in ("y", "yes")


def not_confirmed(said: str = "nothing changed") -> CliExit:
    """The refusal of a command that was not confirmed: without a terminal it says how to go ahead."""
    if sys.stdin.isatty():
        return CliExit(1, said)
    return CliExit(
        1,
        f"{said}: not confirmed; pass --yes to go ahead",
        reason="no terminal to confirm on",
        fix="run the command again with --yes",
    )
