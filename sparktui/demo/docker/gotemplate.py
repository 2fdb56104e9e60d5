"""The part of Go's text/template that `docker --format` strings use.

Supported: fields (`.State.Status`), methods with arguments (`.Label "k"`), pipelines (`|`),
parentheses, string/number literals, `{{- -}}` trimming, `if`/`else`/`range`/`end`, and docker's
functions json, index, join, split, lower, upper, title, len, print, println, printf, truncate, pad.
Values print like Go's: true/false, [a b], map[k:v], <no value>.
"""

from __future__ import annotations

import json
import re
from typing import Any


class TemplateError(Exception):
    pass


def go_str(v: Any) -> str:
    if v is None:
        return "<no value>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if v != int(v) else str(int(v)) if abs(v) < 1e21 else repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(go_str(x) for x in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_str(v[k])}" for k in sorted(v)) + "]"
    return str(v)


def go_json(v: Any) -> str:
    """json.Marshal: compact, with <, > and & escaped as Go does."""
    text = json.dumps(v, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _index(v: Any, *keys: Any) -> Any:
    for k in keys:
        if isinstance(v, dict):
            v = v.get(k)
        elif isinstance(v, (list, tuple)) and isinstance(k, int):
            v = v[k] if 0 <= k < len(v) else None
        else:
            return None
    return v


def _printf(fmt: str, *args: Any) -> str:
    conv = iter(args)
    return re.sub(
        r"%[-+ #0]*\d*(?:\.\d+)?([vsdqf%])",
        lambda m: (
            "%" if m[1] == "%" else (json.dumps(go_str(next(conv, None))) if m[1] == "q" else go_str(next(conv, None)))
        ),
        fmt,
    )


FUNCS = {
    "json": go_json,
    "index": _index,
    "join": lambda items, sep: sep.join(go_str(x) for x in (items or [])),
    "split": lambda s, sep: str(s).split(sep),
    "lower": lambda s: go_str(s).lower(),
    "upper": lambda s: go_str(s).upper(),
    "title": lambda s: go_str(s).title(),
    "len": lambda v: len(v or []),
    "print": lambda *a: "".join(go_str(x) for x in a),
    "println": lambda *a: " ".join(go_str(x) for x in a) + "\n",
    "printf": _printf,
    "truncate": lambda s, n: go_str(s)[: int(n)],
    "pad": lambda s, a, b: " " * int(a) + go_str(s) + " " * int(b),
}

_TOKEN = re.compile(
    r'\s*(?:("(?:[^"\\]|\\.)*")|(`[^`]*`)|(-?\d+(?:\.\d+)?)|(\|)|(\()|(\))|'
    r"((?:\.[A-Za-z_][A-Za-z0-9_]*)+|\.)|([A-Za-z_][A-Za-z0-9_]*))"
)


def _tokens(src: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    src = src.rstrip()
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m or m.end() == pos:
            raise TemplateError(f"unexpected {src[pos:].strip()[:20]!r} in command")
        kinds = ("str", "raw", "num", "pipe", "open", "close", "field", "ident")
        kind = next(k for k, g in zip(kinds, m.groups()) if g is not None)
        out.append((kind, m.group(kinds.index(kind) + 1)))
        pos = m.end()
    return out


def _field(dot: Any, path: str, args: list[Any]) -> Any:
    v = dot
    names = [p for p in path.split(".") if p]
    for i, name in enumerate(names):
        if isinstance(v, dict) and name in v:
            v = v[name]
        elif isinstance(v, dict) and not callable(getattr(type(v), name, None)):
            return None
        elif v is None:
            raise TemplateError(f"nil pointer evaluating .{name}")
        elif hasattr(v, name):
            v = getattr(v, name)
        else:
            raise TemplateError(f"can't evaluate field {name}")
        if callable(v):
            v = v(*(args if i == len(names) - 1 else []))
    return v


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], dot: Any):
        self.t = tokens
        self.i = 0
        self.dot = dot

    def peek(self) -> tuple[str, str] | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def pipeline(self) -> Any:
        value = self.command(None, False)
        while self.peek() and self.peek()[0] == "pipe":
            self.i += 1
            value = self.command(value, True)
        return value

    def operand(self) -> Any:
        kind, text = self.t[self.i]
        self.i += 1
        if kind == "str":
            return json.loads(text)
        if kind == "raw":
            return text[1:-1]
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "field":
            return self.dot if text == "." else _field(self.dot, text, [])
        if kind == "open":
            v = self.pipeline()
            if not self.peek() or self.peek()[0] != "close":
                raise TemplateError("unclosed left paren")
            self.i += 1
            return v
        if kind == "ident":
            if text in ("true", "false"):
                return text == "true"
            if text == "nil":
                return None
            return self._call(text, [])
        raise TemplateError(f"unexpected {text!r}")

    def args(self) -> list[Any]:
        out = []
        while self.peek() and self.peek()[0] not in ("pipe", "close"):
            out.append(self.operand())
        return out

    def _call(self, name: str, args: list[Any]) -> Any:
        fn = FUNCS.get(name)
        if fn is None:
            raise TemplateError(f'function "{name}" not defined')
        try:
            return fn(*args)
        except TypeError as e:
            raise TemplateError(f"wrong number of args for {name}: {e}") from None

    def command(self, piped: Any, has_piped: bool) -> Any:
        tok = self.peek()
        if tok is None:
            raise TemplateError("missing value for command")
        kind, text = tok
        if kind == "ident" and text not in ("true", "false", "nil"):
            self.i += 1
            args = self.args()
            return self._call(text, args + ([piped] if has_piped else []))
        if kind == "field" and text != ".":
            self.i += 1
            args = self.args() + ([piped] if has_piped else [])
            return _field(self.dot, text, args)
        value = self.operand()
        if self.peek() and self.peek()[0] not in ("pipe", "close"):
            raise TemplateError(f"can't give argument to non-function {text}")
        return value


def _eval(expr: str, dot: Any) -> Any:
    p = _Parser(_tokens(expr), dot)
    v = p.pipeline()
    if p.peek() is not None:
        raise TemplateError(f"unexpected {p.peek()[1]!r} in operand")
    return v


def _truthy(v: Any) -> bool:
    return bool(v) and v != "<no value>"


_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)


def _parse(template: str) -> list:
    """Nodes: str, ("expr", src), ("if", src, body, else_body), ("range", src, body, else_body)."""
    pieces: list = []
    pos = 0
    for m in _ACTION.finditer(template):
        text = template[pos : m.start()]
        if m[1]:
            text = text.rstrip()
        pieces.append(text)
        pieces.append(("action", m[2].strip()))
        pos = m.end()
        if m[3]:
            rest = template[pos:]
            pos += len(rest) - len(rest.lstrip())
    pieces.append(template[pos:])

    def block(i: int, stop: tuple[str, ...]) -> tuple[list, int, str | None]:
        nodes: list = []
        while i < len(pieces):
            p = pieces[i]
            if isinstance(p, str):
                if p:
                    nodes.append(p)
                i += 1
                continue
            src = p[1]
            word = src.split(None, 1)[0] if src else ""
            if word in stop:
                return nodes, i, word
            if word in ("if", "range"):
                body, i, end = block(i + 1, ("else", "end"))
                other: list = []
                if end == "else":
                    other, i, end = block(i + 1, ("end",))
                if end != "end":
                    raise TemplateError(f"unexpected EOF: missing {{{{end}}}} for {word}")
                nodes.append((word, src[len(word) :].strip(), body, other))
                i += 1
                continue
            if word in ("else", "end"):
                raise TemplateError(f"unexpected {{{{{word}}}}}")
            if src.startswith("/*"):
                i += 1
                continue
            nodes.append(("expr", src))
            i += 1
        return nodes, i, None

    nodes, _, _ = block(0, ())
    return nodes


def _run(nodes: list, dot: Any, out: list[str]) -> None:
    for n in nodes:
        if isinstance(n, str):
            out.append(n)
        elif n[0] == "expr":
            out.append(go_str(_eval(n[1], dot)))
        elif n[0] == "if":
            _run(n[2] if _truthy(_eval(n[1], dot)) else n[3], dot, out)
        elif n[0] == "range":
            items = _eval(n[1], dot)
            seq = list(items.values()) if isinstance(items, dict) else list(items or [])
            if not seq:
                _run(n[3], dot, out)
            for item in seq:
                _run(n[2], item, out)


def render(template: str, data: Any) -> str:
    """Render a docker --format template (raises TemplateError with Go-like wording)."""
    out: list[str] = []
    _run(_parse(template), data, out)
    return "".join(out)
