"""The one loader for the state files sparktui reads back: journal lines, the deployment record on the
head, a transfer's meta.json, the image-release cache on the head.

Each is JSON filling a dataclass. Here the JSON is parsed with finite numbers only, and every field is
checked against the dataclass's annotation before the dataclass is built, so a hand-edited or damaged
file ends as one StateFileError (file, what is wrong, the way out) and never as a TypeError in whatever
reads the value later.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import json
import math
import os
import types
import typing
from pathlib import Path
from typing import Any, Iterator, TypeVar

T = TypeVar("T")


class StateFileError(ValueError):
    """A state file that cannot be used: `where` (the file), `problem`, and `fix` (the way out)."""

    def __init__(self, where: str, problem: str, fix: str = ""):
        self.where, self.problem, self.fix = where, problem, fix
        super().__init__(self.line())
        if fix:
            _FIXES.add(fix)

    def line(self) -> str:
        """One line for the terminal: FILE: problem; fix."""
        return f"{self.where}: {self.problem}" + (f"; {self.fix}" if self.fix else "")


_FIXES: set[str] = set()  # the ways out this process has given


def fix_in(text: str) -> str | None:
    """The way out of a StateFileError line carried inside another message (a DeployError's, a list of
    plan errors), when `text` holds one: so a --json document can fill its `fix`."""
    return next((f for f in _FIXES if "; " + f in text), None)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):  # 1e400 parses as inf
        raise ValueError(f"{text[:20]} is out of range")
    return v


def parse_json(text: str | bytes, where: str, fix: str = "") -> Any:
    """JSON with finite numbers only (no NaN, Infinity or 1e400), else StateFileError."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise StateFileError(where, "unreadable: nested too deeply", fix) from None
    except ValueError as e:  # JSONDecodeError, a bad number, bytes that are not UTF-8
        raise StateFileError(where, f"unreadable: {_short(str(e))}", fix) from None


def fresh_line(fd: int) -> bytes:
    """b"\n" when the file open at `fd` (readable) ends in a cut-off line, else b"": what an append writes
    first, so the cut-off line does not swallow the new one."""
    size = os.fstat(fd).st_size
    return b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""


def locked_append(fd: int, data: bytes) -> None:
    """Write `data` at the end of the file open at `fd` (O_APPEND, readable), on a fresh line after a
    cut-off one. Under an flock: a writer midway through a line must not read as a cut-off one."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.write(fd, fresh_line(fd) + data)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def append_lines(path: Path, data: bytes) -> None:
    """Append whole lines to a 0600 file in one write, on a fresh line after a cut-off one."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        locked_append(fd, data)
    finally:
        os.close(fd)


def read_lines(path: Path, max_line: int) -> Iterator[tuple[int, bytes | None]]:
    """(number, line) for each line of a file, streamed; a line over max_line bytes is None, never held."""
    with open(path, "rb") as f:
        n = 0
        while True:
            line = f.readline(max_line + 1)
            if not line:
                return
            n += 1
            if len(line) > max_line and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):  # the rest of it, a piece at a time
                    line = f.readline(max_line)
                yield n, None
            else:
                yield n, line.rstrip(b"\n")


def dumps(data: Any, **kw: Any) -> str:
    """JSON as state files are written: a non-finite number is refused here, not found when read back."""
    return json.dumps(data, allow_nan=False, **kw)


def _short(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _kind(tp: Any) -> str:
    """The annotation in words, for the message."""
    if tp is Any:
        return "anything"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_kind(a) for a in typing.get_args(tp))
    if origin is not None:
        return {list: "a list", dict: "an object", tuple: "a list"}.get(origin, str(origin))
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        type(None): "null",
        list: "a list",
        dict: "an object",
    }.get(tp, getattr(tp, "__name__", str(tp)))


def fits(value: Any, tp: Any) -> bool:
    """Whether a JSON value fits a dataclass annotation (str, int, float, bool, None, unions, list[X],
    dict[K, V], Any); an annotation this does not know accepts anything."""
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = typing.get_args(tp)
        return isinstance(value, list) and (not args or all(fits(v, args[0]) for v in value))
    if origin is dict:
        args = typing.get_args(tp)
        return isinstance(value, dict) and (
            not args or all(fits(k, args[0]) and fits(v, args[1]) for k, v in value.items())
        )
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:  # True is an int to Python, not to a state file
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        try:
            return math.isfinite(float(value))
        except OverflowError:  # an integer of 400 digits
            return False
    if tp in (str, list, dict):
        return isinstance(value, tp)
    return True


def fields_of(
    cls: type,
    data: Any,
    where: str,
    fix: str = "",
    *,
    skip: tuple[str, ...] = (),
    ranges: dict[str, tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """The keyword arguments for dataclass `cls` from a JSON object, every field's type checked.

    Unknown keys are ignored (a newer sparktui may add some); a missing field without a default, a value of
    the wrong type, or a number outside `ranges` is a StateFileError. `skip` names fields the caller
    converts itself (they are left out of the result).
    """
    if not isinstance(data, dict):
        raise StateFileError(where, f"holds {_json_kind(data)} where an object was expected", fix)
    hints, fields = _shape(cls)
    out: dict[str, Any] = {}
    for f in fields:
        if f.name in skip or not f.init:
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise StateFileError(where, f"has no {f.name!r}", fix)
            continue
        value = data[f.name]
        if not fits(value, hints.get(f.name, Any)):
            raise StateFileError(
                where,
                f"{f.name!r} is {_json_kind(value)} ({_short(repr(value), 40)}) where "
                f"{_kind(hints[f.name])} was expected",
                fix,
            )
        lo, hi = (ranges or {}).get(f.name, (None, None))
        if lo is not None and isinstance(value, (int, float)) and not lo <= value <= hi:
            raise StateFileError(where, f"{f.name!r} is {_short(repr(value), 40)}, outside {lo:g}..{hi:g}", fix)
        out[f.name] = value
    return out


def field_object(data: dict, name: str, where: str, fix: str = "") -> dict:
    """data[name] as a nested object ({} when absent or null), or StateFileError naming the field."""
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StateFileError(
            where, f"{name!r} is {_json_kind(value)} ({_short(repr(value), 40)}) where an object was expected", fix
        )
    return value


@functools.lru_cache(maxsize=None)
def _shape(cls: type) -> tuple[dict[str, Any], tuple[dataclasses.Field, ...]]:
    """A dataclass's resolved annotations and fields: worked out once (a journal has a million lines)."""
    return typing.get_type_hints(cls), dataclasses.fields(cls)


def load(cls: type[T], data: Any, where: str, fix: str = "", **kw: Any) -> T:
    """`cls(**fields_of(...))`: the dataclass, or StateFileError."""
    return cls(**fields_of(cls, data, where, fix, **kw))


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
