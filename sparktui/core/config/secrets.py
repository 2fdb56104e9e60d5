"""The one place that decides what is secret and hides it: every line or record leaving the process passes here.

A value is secret when its name says so (an environment variable or flag such as HF_TOKEN, --api-key,
DB_PASSWORD, AWS_SECRET_ACCESS_KEY), when the user listed the name in the config (`secrets:`), or when
it is a value already known to be secret (remembered from the plan, so an engine echoing it in a log
line is caught whatever the surrounding text). Values are masked whole: quotes, spaces and all.
"""

from __future__ import annotations

import re
import shlex
import json
import threading

MASK = "****"

# Name parts (split on _ and -) that make a name secret; KEY only as the last part (API_KEY, not KEYFILE).
_PARTS = {"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "APIKEY"}
_INSIDE = ("PASSWORD", "SECRET")  # *PASSWORD*, *SECRET*: also inside a longer part (DBPASSWORD)
_MIN_LITERAL = 6  # shorter known values are masked by name only: "abc" must not vanish from every line

_lock = threading.Lock()
_names: set[str] = set()  # normalised names the user declared secret
_values: list[str] = []  # known secret values and their quoted forms, longest first


def _norm(name: str) -> str:
    return name.lstrip("-").upper().replace("-", "_")


def is_secret_name(name: str) -> bool:
    """Does this variable or flag name (HF_TOKEN, --api-key, api_key) carry a secret?"""
    n = _norm(name)
    if not n:
        return False
    if n in _names:
        return True
    parts = [p for p in n.split("_") if p]
    return any(p in _PARTS for p in parts) or any(w in n for w in _INSIDE) or (bool(parts) and parts[-1] == "KEY")


def add_names(names) -> None:
    """Names the user declared secret (config `secrets:`), as variables or flags."""
    with _lock:
        _names.update(_norm(n) for n in names if n and _norm(n))


def add_values(values) -> None:
    """Remember secret values so any later text containing them is masked (engine logs echo them)."""
    forms: set[str] = set()
    for v in values:
        if not isinstance(v, str) or len(v) < _MIN_LITERAL or v == MASK:
            continue
        q = shlex.quote(v)
        # as written, quoted for a shell, quoted again inside `sh -c '...'`, in JSON and in a Python repr
        forms |= {v, q, q.replace("'", "'\"'\"'"), json.dumps(v)[1:-1], repr(v)[1:-1]}
    with _lock:
        new = forms.difference(_values)
        if new:
            _values[:] = sorted(set(_values) | new, key=len, reverse=True)


def forget() -> None:
    """Drop every remembered name and value (tests; a process reading another config)."""
    with _lock:
        _names.clear()
        _values.clear()


# One shell word: quoted parts, escapes and plain characters glued together ('a b'"c"d\ e).
_WORD = re.compile(r"""(?:'[^']*'|"(?:[^"\\]|\\.)*"|\\.|[^\s'"\\;|&<>()])+""")
# key: value in JSON, Python reprs and YAML-ish dumps: "HF_TOKEN": "x", api_key='x', 'api_key': ['x', 'y']
_STR = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\""""
_KEYED = re.compile(rf"""(?<![\w-])(["']?)([A-Za-z_][\w-]*)\1(\s*[:=]\s*)(\[\s*(?:(?:{_STR})\s*,?\s*)*\]|{_STR})""")
_ASSIGN = re.compile(r"(?<![\w$])([A-Za-z_][A-Za-z0-9_]*)=")
_REPR_ASSIGN = re.compile(rf"([A-Za-z_][A-Za-z0-9_]*)=({_STR})([,;)\]}}]*)\Z")
_HINT = re.compile(r"(?i)token|secret|passw|passphrase|credential|key")  # what every secret name contains
_HINT_WORDS = ("token", "secret", "passw", "passphrase", "credential", "key")  # the same, for needs_mask


def _keyed(m: re.Match) -> str:
    if not is_secret_name(m[2]):
        return m[0]
    v = m[4]
    return f"{m[1]}{m[2]}{m[1]}{m[3]}" + ("[" + MASK + "]" if v.startswith("[") else v[0] + MASK + v[0])


def _unquote(word: str) -> str | None:
    """The word's value as the shell reads it, or None when it does not read as one word."""
    if not any(c in word for c in "'\"\\"):
        return word
    try:
        parts = shlex.split(word)
    except ValueError:
        return None
    return parts[0] if len(parts) == 1 else None


def _words(text: str) -> str:
    """Shell-word pass: NAME=value, --flag=value and `--flag value` with a secret name lose their value."""
    out: list[str] = []
    pos = 0
    hide_next = False
    for m in _WORD.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        word, value = m[0], _unquote(m[0])
        new = None
        if value is None:
            hide_next = False
        elif hide_next:
            hide_next = False
            # the word after a secret flag is its value even when it starts with "-" (argparse takes
            # "-00000" as one): hiding a flag that stood there by mistake costs less than showing a key
            if not value.startswith(MASK):
                new = MASK
        elif value.startswith("-"):
            flag, eq, v = value.partition("=")
            if is_secret_name(flag):
                if eq and not v.startswith(MASK):
                    new = f"{flag}={MASK}"
                elif not eq:
                    hide_next = True
        elif (r := _REPR_ASSIGN.match(word)) and is_secret_name(r[1]):  # api_key='x', in a repr: keep its look
            if r[2][1:-1] != MASK:
                out.append(f"{r[1]}={r[2][0]}{MASK}{r[2][0]}{r[3]}")
                continue
        else:  # NAME=value, also inside a longer word (label=API_TOKEN=x): the value runs to the word's end
            for a in _ASSIGN.finditer(value):
                if is_secret_name(a[1]):
                    rest = value[a.end() :]
                    if rest and not rest.startswith(MASK):
                        new = value[: a.end()] + MASK
                    break
        if new is None:
            out.append(word)
        else:
            out.append(new if word == value else shlex.quote(new))
    out.append(text[pos:])
    return "".join(out)


def mask(text: str) -> str:
    """The text with every secret value replaced by MASK."""
    if not text:
        return text
    for v in _values:  # a snapshot read: the list is replaced whole, never edited in place
        if v in text:
            text = text.replace(v, MASK)
    if not _HINT.search(text) and not (_names and any(n in text.upper().replace("-", "_") for n in _names)):
        return text  # no secret-looking name anywhere: the common log line costs one search
    # shell words first: a quoted shell word ('NAME='"'"'x') must be read whole, not as a repr
    if "=" in text or "-" in text:
        text = _words(text)
    if ":" in text or "=" in text:
        text = _KEYED.sub(_keyed, text)
    return text


def needs_mask(text: str) -> bool:
    """Could mask() change any line of this text? One search over a whole chunk of log output, so
    the common chunk with nothing secret-looking costs no work per line."""
    if any(v in text for v in _values):
        return True
    low = text.lower()  # plain substring searches: _HINT's case-blind alternation is ~100x slower on a chunk
    if any(w in low for w in _HINT_WORDS):
        return True
    return bool(_names) and any(n in text.upper().replace("-", "_") for n in _names)


def mask_args(args: list[str]) -> list[str]:
    """An argument list with secret flag values masked: `--api-key X` and `--api-key=X`."""
    out: list[str] = []
    hide = False
    for a in args:
        if hide:
            out.append(MASK)
            hide = False
        elif a.startswith("-") and "=" in a and is_secret_name(a.split("=", 1)[0]):
            out.append(a.split("=", 1)[0] + "=" + MASK)
        else:
            hide = a.startswith("-") and is_secret_name(a)
            out.append(mask(a))
    return out


def mask_data(obj, key: str | None = None):
    """A copy of JSON-like data with secrets masked: values under secret keys, secret flag values in
    argument lists, and secret text anywhere; made before serialising, so the JSON stays valid."""
    if key is not None and is_secret_name(key) and isinstance(obj, (str, int, float)) and obj != "":
        return MASK
    if isinstance(obj, dict):
        return {k: mask_data(v, str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if all(isinstance(x, str) for x in obj):
            return mask_args(list(obj))
        return [mask_data(x) for x in obj]
    if isinstance(obj, str):
        return mask(obj)
    return obj


def shorten(value: object, limit: int = 80) -> str:
    """A value for a message, cut in the middle when long: a 1 MB bad value is never echoed whole."""
    text = str(value)
    if len(text) <= limit:
        return text
    half = max(4, (limit - 16) // 2)
    return f"{text[:half]}…{text[-half:]} ({len(text)} characters)"
