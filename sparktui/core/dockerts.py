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


def split(raw: str) -> tuple[str | None, tuple[int, int] | None, str]:
    """(timestamp as printed, (unix seconds, nanoseconds), rest) — (None, None, raw) without a prefix."""
    m = DOCKER_TS.match(raw)
    if not m:
        return None, None, raw
    y, mo, d, h, mi, s, frac, zone = m.groups()
    key = (_epoch(y, mo, d, h, mi, s, zone), int(frac.ljust(9, "0")) if frac else 0)
    return raw[: m.end()].rstrip(" "), key, raw[m.end():]
