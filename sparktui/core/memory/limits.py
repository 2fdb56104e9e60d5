"""Sizes and shares in the `memory:` config: "8GiB", "6g", "512MiB" or "5%" of a node's MemTotal."""

from __future__ import annotations

import re

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(i?)b?|(b))\s*\Z", re.I)
_SHARE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*%\s*\Z")
_POW = {"k": 1, "m": 2, "g": 3, "t": 4}

SIZE_HINT = "a size such as 8GiB or 6g, or a share of MemTotal such as 5%"


def parse_amount(text: str) -> tuple[int | None, float | None]:
    """(bytes, None) for a size, (None, share 0..1) for a percentage; ValueError with the reason otherwise.
    Units are binary whatever their spelling (g = GiB), as docker and the kernel count memory."""
    m = _SHARE.match(text)
    if m:
        share = float(m.group(1)) / 100
        if not 0 < share < 1:
            raise ValueError(f"{text.strip()} is not a share between 0% and 100%")
        return None, share
    m = _SIZE.match(text)
    if not m:
        why = "has no unit" if re.fullmatch(r"\s*\d+(\.\d+)?\s*", text) else "is not a size or a share"
        raise ValueError(f"{text.strip()!r} {why}")
    unit = (m.group(2) or "").lower()
    return int(float(m.group(1)) * 1024 ** _POW.get(unit, 0)), None


def amount_bytes(text: str, total_bytes: int | None) -> int | None:
    """The amount in bytes on a node of `total_bytes` MemTotal (None: a share of an unknown total)."""
    size, share = parse_amount(text)
    if size is not None:
        return size
    return None if not total_bytes else int(total_bytes * share)
