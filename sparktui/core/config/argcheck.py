"""Checks for option values typed on a command line or in a form, made before any node is asked.

Each returns the value as it will be used or raises ValueError with a short sentence (the value shortened),
so `sparktui logs --since '$(x)'` or `--bwlimit garbage` stop here with exit 2 instead of failing on
every node later.
"""

from __future__ import annotations

import math
import re

from .secrets import shorten

# docker's --since/--until: RFC 3339 (date, date and time, fraction, Z or offset), unix seconds, or a Go duration
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?\Z")
_UNIX = re.compile(r"\d{1,12}(\.\d{1,9})?\Z")
_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+\Z")
# rsync's --bwlimit: a number (KiB/s) with an optional K/M/G/T/P multiplier, B or iB after it; 0 = no limit
_RATE = re.compile(r"\d{1,12}(\.\d{1,6})?([KMGTP]([I]?B)?)?\Z", re.I)


def _bad(what: str, value: str, expected: str) -> ValueError:
    return ValueError(f"{what} {shorten(repr(value), 60)} is not {expected}")


def docker_since(value: str) -> str:
    """A time docker logs --since understands: 2026-01-02T10:00:00Z, 1767348000 or 10m."""
    v = value.strip()
    if _RFC3339.match(v) or _UNIX.match(v) or _DURATION.match(v):
        return v
    raise _bad("--since", value, "a time: RFC 3339 (2026-01-02T10:00:00Z), unix seconds, or a duration such as 10m")


def rsync_rate(value: str) -> str:
    """A rate rsync --bwlimit understands: 200m, 1.5G, 50000 (KiB/s)."""
    v = value.strip()
    if _RATE.match(v):
        return v
    raise _bad("--bwlimit", value, "a rate such as 200m, 1.5g or 50000 (KiB/s)")


def seconds(value: str, what: str = "--timeout", most: float = 7 * 86400) -> float:
    """A finite positive number of seconds (nan, inf, 0 and negatives are mistakes)."""
    try:
        s = float(value) if len(value) <= 40 else math.nan
    except ValueError:
        s = math.nan
    if not (math.isfinite(s) and 0 < s <= most):
        raise _bad(what, value, f"a number of seconds above 0 and at most {most:g}")
    return s


def count(value: str, what: str, lo: int = 1, hi: int = 1 << 20) -> int:
    """A whole number lo..hi."""
    v = value.strip()
    if not re.fullmatch(r"[+-]?\d{1,12}", v) or not lo <= int(v) <= hi:
        raise _bad(what, value, f"a whole number {lo}-{hi}")
    return int(v)
