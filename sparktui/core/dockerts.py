"""docker's `logs -t` timestamp prefix (RFC3339Nano), parsed once for the diagnosis and the log follower."""
from __future__ import annotations

import functools
import re
from calendar import timegm

# "2026-11-29T18:29:47.123456789Z " (docker may print fewer fraction digits, or an offset)
DOCKER_TS = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d) ?")


@functools.lru_cache(maxsize=1024)
def _epoch(y: str, mo: str, d: str, h: str, mi: str, s: str, zone: str) -> int:
    # cached: a flood of lines shares a handful of seconds, and this was the hot spot of log intake
    secs = timegm((int(y), int(mo), int(d), int(h), int(mi), int(s)))
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        secs -= (1 if zone[0] == "+" else -1) * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return secs


_HEAD = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_SECONDS: dict[str, int] = {}  # "2026-11-29T18:29:47" -> unix seconds, for the fast path


def split(raw: str) -> tuple[str | None, tuple[int, int] | None, str]:
    """(timestamp as printed, (unix seconds, nanoseconds), rest) — (None, None, raw) without a prefix."""
    # Fast path for what docker prints (UTC, "Z"): slicing and a dict look-up instead of a regex and a
    # tuple of groups per line; this runs for every line of every log.
    if len(raw) >= 20 and raw[10] == "T" and raw[4] == "-":
        sp = raw.find(" ", 19)
        ts = raw if sp < 0 else raw[:sp]
        if ts[-1] == "Z" and (len(ts) == 20 or ts[19] == "."):
            head = ts[:19]
            secs = _SECONDS.get(head)
            if secs is None and _HEAD.fullmatch(head):
                if len(_SECONDS) > 4096:
                    _SECONDS.clear()
                secs = _SECONDS[head] = _epoch(head[:4], head[5:7], head[8:10], head[11:13], head[14:16],
                                                head[17:19], "Z")
            frac = ts[20:-1]
            if secs is not None and len(frac) <= 9 and (not frac or (frac.isascii() and frac.isdigit())):
                return ts, (secs, int(frac.ljust(9, "0")) if frac else 0), ("" if sp < 0 else raw[sp + 1:])
    m = DOCKER_TS.match(raw)
    if not m:
        return None, None, raw
    y, mo, d, h, mi, s, frac, zone = m.groups()
    key = (_epoch(y, mo, d, h, mi, s, zone), int(frac.ljust(9, "0")) if frac else 0)
    return raw[: m.end()].rstrip(" "), key, raw[m.end():]


def split_many(raws: list[str]) -> list[tuple[str | None, tuple[int, int] | None, str]]:
    """split() for every line of a chunk: the fast path inlined, with one look-up per second seen."""
    out = []
    add = out.append
    seconds = _SECONDS
    for raw in raws:
        if raw.endswith("\r"):
            raw = raw[:-1]
        sp = raw.find(" ", 19)
        if sp > 19 and raw[sp - 1] == "Z" and raw[10] == "T" and (sp == 20 or raw[19] == "."):
            secs = seconds.get(raw[:19])
            frac = raw[20:sp - 1]
            if secs is not None and len(frac) <= 9 and frac.isdigit() and frac.isascii():
                add((raw[:sp], (secs, int(frac.ljust(9, "0")) if frac else 0), raw[sp + 1:]))
                continue
        add(split(raw))  # a new second, another zone, no timestamp: the full parser (which caches the second)
    return out
