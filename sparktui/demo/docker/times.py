"""Times as docker prints them: RFC3339Nano stamps, `--since` values, "Up 2 minutes" durations."""

from __future__ import annotations

import calendar
import re
import time

ZERO = "0001-01-01T00:00:00Z"  # docker's unset time (FinishedAt of a running container)


def now_ns() -> int:
    return time.time_ns()


def rfc3339(ns: int) -> str:
    """2025-11-29T18:22:01.123456789Z: fixed nine digits, as `docker logs -t` prints."""
    s, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{frac:09d}Z"


_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?\s*(Z|z|[+-]\d\d:?\d\d)?\Z")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def parse_stamp(text: str) -> int | None:
    """RFC3339 (any fraction, Z or offset; no zone = UTC) to epoch nanoseconds; None if it is not one."""
    m = _STAMP.match(text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    ns = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) * 1_000_000_000
    ns += int((m[7] or "0").ljust(9, "0"))
    zone = m[8]
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        ns -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60) * 1_000_000_000
    return ns


def parse_since(text: str, now: int | None = None) -> int | None:
    """A `--since`/`--until` value: RFC3339, a Unix time (with fraction) or a duration back from now."""
    t = text.strip()
    now = now_ns() if now is None else now
    stamp = parse_stamp(t)
    if stamp is not None:
        return stamp
    if re.fullmatch(r"\d+(\.\d{1,9})?", t):
        whole, _, frac = t.partition(".")
        return int(whole) * 1_000_000_000 + int(frac.ljust(9, "0") or 0)
    parts = _DURATION.findall(t)
    if parts and "".join(a + u for a, u in parts) == t:
        return now - int(sum(float(a) * _UNIT_NS[u] for a, u in parts))
    return None


def human(seconds: float) -> str:
    """docker's units.HumanDuration: "Less than a second", "About a minute", "3 hours", ..."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    m = s // 60
    if m == 1:
        return "About a minute"
    if m < 60:
        return f"{m} minutes"
    h = round(s / 3600)
    if h == 1:
        return "About an hour"
    if h < 48:
        return f"{h} hours"
    if h < 24 * 7 * 2:
        return f"{h // 24} days"
    if h < 24 * 30 * 2:
        return f"{h // 24 // 7} weeks"
    if h < 24 * 365 * 2:
        return f"{h // 24 // 30} months"
    return f"{h // 24 // 365} years"


def created_at(ns: int) -> str:
    """`docker ps`'s CreatedAt: 2025-11-29 18:22:01 +0000 UTC."""
    return time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(ns // 1_000_000_000))
