"""Silence counts: tick the Diagnoser so a rank quiet for too long in its phase is flagged.

The judgement is Diagnoser.tick's, on the phase model (core/diagnosis/phases.py) that `sparktui diagnose`
uses too: silence counts from each node's last line, against the limit of the phase that node is
in (distributed and NCCL init: hang_after, flagged as a rendezvous hang; later phases: their own
limits, flagged as stalled). This only makes time pass for it while no line arrives, which is
exactly when nothing else would call it.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from ..diagnosis.diagnose import Diagnoser, Event


def tick_interval(hang_after: float) -> float:
    """Often enough to flag a hang within ~10 % of hang_after, never busier than 10 times a second."""
    return min(5.0, max(0.1, hang_after / 10))


async def watch(
    diagnoser: Diagnoser,
    on_events: Callable[[list[Event]], None],
    interval: float | None = None,
    max_ticks: int | None = None,
) -> None:
    """Tick until cancelled (or `max_ticks`); the owner cancels it when the deployment stops."""
    interval = interval or tick_interval(diagnoser.hang_after)
    n = 0
    while max_ticks is None or n < max_ticks:
        await asyncio.sleep(interval)
        n += 1
        events = diagnoser.tick()
        if events:
            on_events(events)
