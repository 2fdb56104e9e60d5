"""The events the core emits. The TUI turns them into messages; the CLI prints them.

Plain dataclasses, no UI types: data flows remote process -> core -> event -> UI.
Modules may add their own events here; keep each small and documented.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .facts import NodeFacts


@dataclass
class NodeUpdated:
    """Fresh facts for a node (or the reason it is unreachable)."""

    facts: NodeFacts


@dataclass
class ConnectionChanged:
    """A node's SSH link went up or down."""

    node: str
    connected: bool
    error: str | None = None


@dataclass
class LogLines:
    """A batch of output lines from one node's process or container."""

    node: str
    source: str  # e.g. container name
    lines: list[str] = field(default_factory=list)


Listener = Callable[[Any], None]


class EventBus:
    """Synchronous fan-out of core events to listeners (UI, CLI printers, tests)."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, fn: Listener) -> Callable[[], None]:
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def emit(self, event: Any) -> None:
        for fn in list(self._listeners):
            fn(event)
