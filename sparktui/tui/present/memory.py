"""The memory lines of the launch pane: one per node, MemAvailable's sparkline and the guard's level. Pure."""

from __future__ import annotations

from textual.content import Content

from ...core.state.events import NodeMemory
from .serving import sparkline

GIB = 1024**3
WIDTH = 24  # readings shown: ~50 s at the default 2 s pace, and the line fits 80 columns
STYLE = {"ok": "$success", "warn": "$warning", "stop": "$error", "unwatched": "$text-muted"}


def memory_line(e: NodeMemory, history: list[float], name_width: int = 0) -> Content:
    """`n2  mem ▇▇▆▅▃ 11.5 of 128.0 GiB free psi 0.5% warn` (free: MemAvailable); the sparkline is scaled to
    the node's MemTotal."""
    s = e.sample
    style = STYLE.get(e.level, "")
    head = Content.assemble((s.node.ljust(name_width), "bold"), " mem ")
    if s.available is None or not s.total:
        return Content.assemble(head, ("not read", style), " ", (sparkline(history, WIDTH, s.total or None), style))
    psi = "" if s.psi_full is None else f" psi {s.psi_full:g}%"
    return Content.assemble(
        head,
        (sparkline(history, WIDTH, float(s.total)), style),
        f" {s.available / GIB:.1f} of {s.total / GIB:.1f} GiB free{psi} ",
        (e.level, style),
    )
