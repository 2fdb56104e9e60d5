"""A journal entry (one remote command) as table cells."""

from __future__ import annotations

import time

from textual.content import Content

from ...core.state.journal import Entry
from . import fmt

COLUMNS = ("time", "node", "exit", "took", "command (enter: the whole entry)")


def exit_cell(e: Entry) -> Content:
    if e.exit_status is None:
        return Content.styled("…", "$accent") if e.error is None else Content.styled("stopped", "$text-muted")
    if e.exit_status == 0:
        return Content.styled("✓ 0", "$success")
    if e.exit_status == -1:
        return Content.styled("never", "$error")
    return Content.styled(f"✗ {e.exit_status}", "$error")


def entry_cells(e: Entry, command_width: int = 60) -> tuple:
    command = " ".join(e.command.split())  # newlines of scripts would break the row
    if e.error and e.exit_status not in (None, 0):
        command = f"{command}  [{e.error}]"
    return (
        time.strftime("%H:%M:%S", time.localtime(e.started)),
        e.node,
        exit_cell(e),
        fmt.duration(e.duration)
        if e.duration is not None and e.duration >= 1
        else (f"{e.duration * 1000:.0f}ms" if e.duration is not None else "—"),
        fmt.ellipsize(command, command_width),
    )
