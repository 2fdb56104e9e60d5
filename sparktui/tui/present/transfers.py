"""A transfer's progress as two lines: a bar with rate and ETA, then its state and verify result."""

from __future__ import annotations

from textual.content import Content

from ...core.state.events import TransferProgress
from . import fmt

STATE_STYLE = {
    "preparing": "$text-muted",
    "running": "$accent",
    "verifying": "$warning",
    "done": "$success bold",
    "failed": "$error bold",
    "cancelled": "$warning",
    "lost": "$error",
}
ACTIVE = ("preparing", "running", "verifying")


def fraction(t: TransferProgress) -> float | None:
    if t.state == "done":
        return 1.0
    if t.percent is not None:
        return t.percent / 100
    if t.total_bytes:
        return t.bytes / t.total_bytes
    return None


def key(t: TransferProgress) -> str:
    """One bar per destination and kind: a later transfer to the same place replaces the row."""
    return f"{t.kind}:{t.dest}"


def transfer_lines(t: TransferProgress, width: int = 78) -> Content:
    frac = fraction(t)
    head = f"{t.kind:<5} {t.source}→{t.dest} "
    pct = f"{frac * 100:5.1f}%" if frac is not None else "    ?%"
    tail = f" {pct} {fmt.rate(t.rate):>10}"
    if t.state in ACTIVE:
        tail += f" ETA {fmt.duration(t.eta)}"
    bar_w = max(6, width - len(head) - len(tail) - 2)
    style = STATE_STYLE.get(t.state, "")
    first = Content.assemble(head, (fmt.bar(frac, bar_w), style), tail)
    done = f"{fmt.size(t.bytes)}" + (f" of {fmt.size(t.total_bytes)}" if t.total_bytes else "")
    if t.files_total and t.files_done is not None:
        done += f", files {t.files_done}/{t.files_total}"
    elif t.files_total:
        done += f", {t.files_total} files"
    second = Content.assemble("      ", (t.state, style), f"  {done}")
    if t.elapsed is not None:
        second += Content(f"  {fmt.duration(t.elapsed)} elapsed")
    lines = [first, second]
    how = stream_line(t, max(10, width - 6))
    if how:
        lines.append(Content.assemble("      ", (how, "$text-muted")))
    if t.message:  # its own line: verify results and failure reasons are what the user reads first
        msg_style = "$error" if t.state in ("failed", "lost") else "$success" if t.state == "done" else "$text-muted"
        lines.append(Content.assemble("      ", (fmt.ellipsize(t.message, max(10, width - 6)), msg_style)))
    return Content("\n").join(lines)


def stream_line(t: TransferProgress, width: int = 72) -> str:
    """How the copy moves: its parallel rsync streams (each one's share while it runs) and the ssh
    cipher, e.g. '3 streams: #0 41% 120.3 MB/s · #1 38% 118.0 MB/s · #2 done — aes128-gcm'."""
    parts = []
    rows = t.streams or []
    if len(rows) > 1:
        each = []
        for r in rows:
            if r.get("done"):
                each.append(f"#{r['n']} " + ("done" if not r.get("rc") else f"failed ({r['rc']})"))
            else:
                pct = f"{r['percent']}%" if r.get("percent") is not None else "?%"
                each.append(f"#{r['n']} {pct} {fmt.rate(r.get('rate'))}")
        parts.append(f"{len(rows)} streams: " + " · ".join(each) if t.state in ACTIVE else f"{len(rows)} streams")
    if t.cipher:
        parts.append(f"ssh {t.cipher.split('@')[0]}")
    return fmt.ellipsize(" — ".join(parts), width) if parts else ""


def summary(transfers: list[TransferProgress]) -> str:
    """'2 running, 1 done, 1 failed' for the pane's title line."""
    counts: dict[str, int] = {}
    for t in transfers:
        counts[t.state] = counts.get(t.state, 0) + 1
    if not counts:
        return "no transfers"
    order = ("running", "preparing", "verifying", "done", "failed", "cancelled", "lost")
    return ", ".join(f"{counts[s]} {s}" for s in order if s in counts)
