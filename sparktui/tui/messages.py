"""Textual messages: one for everything the core says, and the few the screen says to itself.

`CoreEvent` carries a core event (sparktui.core.state.events, diagnose's milestones and problems), a journal
entry, an inventory round or the log drain (controller.py); the app routes it to the widget that owns
its data (routing.py). post_message is safe from any thread.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message


class CoreEvent(Message):
    """What the core reported, as it reported it (`event`): no per-event message class mirrors it."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event


class OperationFailed(Message):
    """A core operation raised: shown to the user, never a crash."""

    def __init__(self, what: str, error: str) -> None:
        super().__init__()
        self.what = what
        self.error = error


class OperationDone(Message):
    """A core operation finished; `result` is its plain-words outcome."""

    def __init__(self, what: str, result: str = "") -> None:
        super().__init__()
        self.what = what
        self.result = result


class Refused(Message):
    """A prepared operation failed its checks (plan errors, the fabric, ports held): nothing ran."""

    def __init__(self, prepared: Any) -> None:
        super().__init__()
        self.prepared = prepared


class PreflightAsked(Message):
    """A prepared launch, pivot or redeploy passed its checks; its preflight starts now."""

    def __init__(self, prepared: Any) -> None:
        super().__init__()
        self.prepared = prepared


class Confirmed(Message):
    """A prepared operation runs now (checked, preflighted, confirmed where it asks)."""

    def __init__(self, prepared: Any) -> None:
        super().__init__()
        self.prepared = prepared
