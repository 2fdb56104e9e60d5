"""Drive a FanOut: start pairs as senders free up, follow transfers already running, collect outcomes."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import Awaitable, Callable

from .schedule import FanOut


@dataclass
class Outcome:
    """How one destination ended up."""

    dest: str
    ok: bool
    message: str
    source: str | None = None
    id: str | None = None  # transfer id, when one ran
    blocked: bool = False  # the sender could not reach dest: try another sender

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("blocked")
        return d


Transfer = Callable[[str, str], Awaitable[Outcome]]


async def run_fanout(
    fan: FanOut,
    transfer: Transfer,
    adopted: dict[str, Awaitable[Outcome]] | None = None,
    stranded_message: Callable[[str], str] | None = None,
) -> dict[str, Outcome]:
    """Run every destination of `fan` through `transfer(sender, dest)`; `adopted` are transfers
    already running (from an earlier sparktui), whose destinations join as senders when they succeed."""
    outcomes: dict[str, Outcome] = {}
    tasks: dict[asyncio.Task, tuple[str | None, str]] = {}
    for dest, aw in (adopted or {}).items():
        tasks[asyncio.ensure_future(aw)] = (None, dest)
    try:
        while True:
            for sender, dest in fan.next():
                tasks[asyncio.ensure_future(transfer(sender, dest))] = (sender, dest)
            if not tasks:
                break
            done, _ = await asyncio.wait(list(tasks), return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                sender, dest = tasks.pop(t)
                try:
                    out = t.result()
                except Exception as e:  # a bug or a dropped node must not strand the other transfers
                    out = Outcome(dest, False, f"{type(e).__name__}: {e}", sender)
                if sender is None:  # adopted: not part of the schedule, but a sender once done
                    outcomes[dest] = out
                    if out.ok:
                        fan.add_sender(dest)
                elif out.blocked:
                    fan.block(sender, dest)
                    outcomes.setdefault(dest, out)  # kept in case no other sender can reach it
                else:
                    fan.finished(dest, out.ok)
                    outcomes[dest] = out
    finally:
        for t in tasks:
            t.cancel()
    for dest in fan.waiting:
        prev = outcomes.get(dest)
        msg = stranded_message(dest) if stranded_message else f"no node holding a copy can reach {dest}"
        outcomes[dest] = Outcome(dest, False, prev.message if prev else msg, prev.source if prev else None)
    return outcomes
