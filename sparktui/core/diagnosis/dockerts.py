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
_SECONDS: dict[str, int] = {}  # "2026-11-29T18:29:47" -> its unix time in nanoseconds, for the fast path
NS = 1_000_000_000


def split(raw: str) -> tuple[str | None, int | None, str]:
    """(timestamp as printed, unix time in nanoseconds, rest) — (None, None, raw) without a prefix.
    The time is one int: exact, ordered, and no object for the garbage collector to track."""
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
                secs = _SECONDS[head] = NS * _epoch(
                    head[:4], head[5:7], head[8:10], head[11:13], head[14:16], head[17:19], "Z"
                )
            frac = ts[20:-1]
            if secs is not None and len(frac) <= 9 and (not frac or (frac.isascii() and frac.isdigit())):
                return ts, secs + (int(frac.ljust(9, "0")) if frac else 0), ("" if sp < 0 else raw[sp + 1 :])
    m = DOCKER_TS.match(raw)
    if not m:
        return None, None, raw
    y, mo, d, h, mi, s, frac, zone = m.groups()
    key = NS * _epoch(y, mo, d, h, mi, s, zone) + (int(frac.ljust(9, "0")) if frac else 0)
    return raw[: m.end()].rstrip(" "), key, raw[m.end() :]


def split_many(raws: list[str]) -> tuple[list[str | None], list[int | None], list[str]]:
    """split() for every line of a chunk, as three columns (timestamps, keys, texts): no object per
    line beyond its key, because a flood makes millions (and each one feeds the garbage collector)."""
    stamps: list[str | None] = []
    keys: list[int | None] = []
    texts: list[str] = []
    add_s, add_k, add_t = stamps.append, keys.append, texts.append
    seconds = _SECONDS
    for raw in raws:
        if raw.endswith("\r"):
            raw = raw[:-1]
        # What docker prints today: 9 fraction digits and "Z" ("2026-11-29T18:29:47.123456789Z text").
        if raw[29:31] == "Z " and raw[19] == ".":
            secs = seconds.get(raw[:19])
            frac = raw[20:29]
            if secs is not None and frac.isdigit() and frac.isascii():
                add_s(raw[:30])
                add_k(secs + int(frac))
                add_t(raw[31:])
                continue
        ts, key, text = split(raw)  # a new second, fewer digits, another zone, no timestamp: the full parser
        add_s(ts)
        add_k(key)
        add_t(text)
    return stamps, keys, texts
