"""`sparktui`: the TUI by default, and every operation as a headless command with --json."""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from .. import __version__
from ..core.state.statefile import StateFileError

# Each module adds its subcommands with register(subparsers).
COMMAND_MODULES = [
    "check",
    "plan",
    "diagnose",
    "sync",
    "deploy",
    "journal",
    "demo",
    "preflight",
    "init",
    "memory",
    "metrics",
    "bench",
]
# Which module registers which command word: a run imports only the module of its command, so
# `--version` or `plan` never pays for SSH, cryptography or the TUI (tests/unit/test_cli_lazy.py keeps
# this in step with the modules; a word missing here still works, it only loads every module).
COMMANDS = {
    "check": "check",
    "status": "check",
    "plan": "plan",
    "diagnose": "diagnose",
    "sync": "sync",
    "setup": "sync",
    "launch": "deploy",
    "stop": "deploy",
    "pivot": "deploy",
    "redeploy": "deploy",
    "logs": "deploy",
    "journal": "journal",
    "demo": "demo",
    "preflight": "preflight",
    "init": "init",
    "drop-caches": "memory",
    "metrics": "metrics",
    "bench": "bench",
}
ALSO = {"status": ["sync", "deploy"]}  # modules that add sections to a command of another module
_VALUED = ("--config", "-c", "--theme")  # the global options that take a value


def command_word(argv: list[str]) -> str | None:
    """The command word in argv (the first word that is not a global option or its value)."""
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
        elif a == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        elif a in _VALUED:
            skip = True
        elif not a.startswith("-"):
            return a
    return None


def _modules_for(argv: list[str] | None) -> list[str]:
    if argv is None:
        return COMMAND_MODULES
    word = command_word(argv)
    if word is None:  # the TUI, --version, or the full --help
        return COMMAND_MODULES if ("-h" in argv or "--help" in argv) else []
    mod = COMMANDS.get(word)
    if mod not in COMMAND_MODULES:
        return COMMAND_MODULES  # unknown: argparse lists every choice
    return [mod] + [m for m in ALSO.get(word, []) if m in COMMAND_MODULES]


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad value it quotes (invalid choice, unknown argument) is shortened, never echoed whole."""

    last_error: str | None = None  # for the --json error document (main)

    def error(self, message: str):
        from ..core.config.secrets import shorten

        _Parser.last_error = shorten(message, 400)
        bad = _INVALID_CHOICE.match(message)
        if bad:  # one line that names the likely choice, not the whole usage block above it
            from ..core.config.yamlpos import did_you_mean

            choices = re.findall(r"'([^']*)'", bad.group(3))
            line = (
                f"{bad.group(1)}: invalid choice: '{shorten(bad.group(2), 80)}'; "
                f"{_hint(did_you_mean(bad.group(2), choices), choices)}"
            )
            _Parser.last_error = line
            self.exit(2, f"{self.prog}: error: {line}\n")
        super().error(shorten(message, 400))


def _hint(hint: str, choices: list[str]) -> str:
    return hint if hint.startswith("expected") or "case" in hint else f"{hint} (choices: {', '.join(choices)})"


# argparse's wording (Lib/argparse.py, _check_value): the value is repr()'d; with suggest_on_error (CPython 3.14,
# on by default from 3.15) a close choice comes between: "invalid choice: 'rey', maybe you meant 'ray'? (choose ..."
_INVALID_CHOICE = re.compile(
    r"(argument [^:]+): invalid choice: '(.*)'(?:, maybe you meant '[^']*'\?)? \(choose from (.*)\)$", re.S
)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with `argv`, only the command modules that argv needs are imported."""
    from .common import add_config_arg

    p = _Parser(prog="sparktui", description=__doc__)
    p.add_argument("--version", action="version", version=f"sparktui {__version__}")
    add_config_arg(p)
    p.add_argument("--theme", metavar="NAME", help="TUI theme (dark, light, high-contrast or a file's name)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in _modules_for(argv):
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}":
                continue  # command group not part of this build
            raise
        mod.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    from . import common
    from .common import CliExit

    common.json_written = False
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse said what is wrong on stderr; under --json stdout says it too
        if e.code == 2 and "--json" in argv and _Parser.last_error:
            common.print_json(common.error_document(2, _Parser.last_error, command=command_word(argv)))
        raise
    func = getattr(args, "func", None)
    if getattr(args, "json", False):
        common.held = []  # one document, written once the exit code is known
    code = 1
    try:
        if getattr(args, "theme", None):  # checked for every command, so `--theme neon demo` stops here
            from .tui import check_theme

            check_theme(args.theme)
        if func is None:
            from .tui import run_tui  # the TUI is the default command

            func = run_tui
        result = func(args)
        import inspect

        if inspect.iscoroutine(result):
            import asyncio

            result = asyncio.run(result)
        code = int(result or 0)
    except CliExit as e:
        code = _exit(args, e.code, e.message, e.reason, e.fix)
    except StateFileError as e:  # a loader's refusal that no command turned into words of its own
        code = _exit(args, 1, e.line(), e.problem, e.fix)
    except KeyboardInterrupt:
        code = _exit(args, 130, "interrupted")
    finally:
        common.release(code, getattr(args, "command", None))
    return code


def _exit(args: argparse.Namespace, code: int, message: str, reason: str | None = None, fix: str | None = None) -> int:
    """Say why the command stops: on stderr, and under --json as the error document on stdout (unless the
    command already printed its JSON there)."""
    from . import common

    if message:
        common.err_console.print(message, markup=False, soft_wrap=True)  # rich loads only to say something
    if getattr(args, "json", False):
        doc = common.error_document(code, message, reason, fix, getattr(args, "command", None))
        if not common.json_written:
            common.print_json(doc)
        elif message and common.held and isinstance(common.held[-1], dict) and "error" not in common.held[-1]:
            common.held[-1] = {**doc, **common.held[-1]}  # the document printed before the refusal, and why
    return code


def entry() -> None:
    sys.exit(main())
