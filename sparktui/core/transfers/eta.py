"""How long a transfer has left, from a rate that has been measured.

rsync's first updates come before its pace is known: after a first small file the rate it prints is
that file's (469 bytes at 46 kB/s), and bytes left at it read as 23 minutes for a 2-second copy.
"""

from __future__ import annotations

MIN_SECONDS = 1.0  # rsync reports about once a second: sooner, no rate has been measured
MIN_SHARE = 0.01  # of the bytes to copy, moved before a rate stands for the copy's pace
MIN_SHARE_CAP = 256 << 20  # ... but never more than this much, so a huge copy gets an ETA soon


def eta(total: int | None, done: int | None, rate: float | None, elapsed: float | None) -> float | None:
    """Seconds left, or None until they can be told. Never longer than the average pace since the
    start predicts (done / elapsed), so a stale low rate cannot inflate it."""
    if not total or done is None:
        return None
    left = max(0, total - done)
    if left == 0:
        return 0.0
    if elapsed is None or elapsed < MIN_SECONDS or done < min(MIN_SHARE * total, MIN_SHARE_CAP):
        return None
    pace = max(rate or 0.0, done / elapsed)
    return left / pace if pace > 0 else None
