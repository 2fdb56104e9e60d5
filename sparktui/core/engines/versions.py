"""Release numbers, read and compared: each engine's module names the first release that has a fact it gates
on (VLLM_NATIVE_SINCE in vllm.py, ...), checked against that release's own source.
"""

from __future__ import annotations

import re


def parse(version: str) -> tuple[int, ...] | None:
    """'0.11.0', '0.5.3.post3', '0.12.0rc1+cu130', 'v0.9' -> (0, 11, 0) ...; None when unreadable."""
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version or "")
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def at_least(version: str | None, since: str) -> bool:
    """True when version is since or newer; an unknown version counts as new (the plan says so)."""
    v, s = parse(version or ""), parse(since)
    if v is None or s is None:
        return True
    n = max(len(v), len(s))
    return v + (0,) * (n - len(v)) >= s + (0,) * (n - len(s))
