"""Small formatters shared by the panes: sizes, rates, durations and text bars."""

from __future__ import annotations

GIB = 1024**3
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(n: int | float | None) -> str:
    """Bytes in binary units with one decimal above KiB: '118.0 GiB'; '?' when unknown."""
    if n is None:
        return "?"
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"  # not reached; keeps type checkers calm


def rate(bps: float | None) -> str:
    """Bytes per second in decimal units, as rsync prints them: '412.0 MB/s'."""
    if bps is None:
        return "—"
    value = float(bps)
    for unit in ("B/s", "kB/s", "MB/s", "GB/s"):
        if value < 1000 or unit == "GB/s":
            return f"{value:.0f} {unit}" if unit == "B/s" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB/s"


def duration(seconds: float | None) -> str:
    """'45s', '2m05s', '1h02m'; '—' when unknown."""
    if seconds is None or seconds < 0:
        return "—"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def bar(fraction: float | None, width: int) -> str:
    """A text bar of `width` cells, eighths for the partial cell; unknown shows as a dotted bar."""
    width = max(1, width)
    if fraction is None:
        return "·" * width
    fraction = min(1.0, max(0.0, fraction))
    eighths = int(round(fraction * width * 8))
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part and full < width else ""
    return ("█" * full + partial).ljust(width, "░")[:width]


def ellipsize(text: str, width: int) -> str:
    """Cut text to `width` cells with a trailing '…' when it does not fit."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
