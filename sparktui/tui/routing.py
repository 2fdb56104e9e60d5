"""Which object handles which core event: each pane marks the events whose data it owns.

A handler is a method marked `@handles(EventType, ...)` taking the event. `Router` sends every event to
the handlers of its owners, in the order they were given (the panes first: the app's own reactions,
notifications and the status line, read what the panes already show).

Routing is a synchronous call made from the app's one CoreEvent handler rather than a message posted
to each widget's own queue (as toolong does: Textualize/toolong src/toolong/log_lines.py, LineReader
posts LineRead to the LogLines widget): with one queue per widget a pane's queue could overtake the
app's, and the core's order matters (a hang problem must be seen before the `hung` state it explains,
a preflight's reset before its rows).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

_MARK = "_sparktui_handles"


def handles(*types: type) -> Callable[[Callable], Callable]:
    """Mark a method as the handler of these core event types."""

    def mark(fn: Callable) -> Callable:
        setattr(fn, _MARK, types)
        return fn

    return mark


def _table(cls: type) -> dict[type, list[str]]:
    """Event type -> names of the methods of `cls` marked for it (cached per class)."""
    cached = cls.__dict__.get("_sparktui_routes")
    if cached is not None:
        return cached
    table: dict[type, list[str]] = {}
    seen: set[str] = set()
    for klass in cls.__mro__:
        for name, fn in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            for t in getattr(fn, _MARK, ()):
                table.setdefault(t, []).append(name)
    setattr(cls, "_sparktui_routes", table)
    return table


class Router:
    """Delivers each event to the marked handlers of `owners`; the handlers per event type are
    looked up once (a log flood pays one dict lookup per batch)."""

    def __init__(self, owners: Iterable[Any]) -> None:
        self.owners = list(owners)
        self._by_type: dict[type, list[Callable[[Any], Any]]] = {}

    def handlers(self, etype: type) -> list[Callable[[Any], Any]]:
        found = self._by_type.get(etype)
        if found is None:
            found = []
            for owner in self.owners:
                table = _table(type(owner))
                for t in etype.__mro__:  # a subclass of an event goes where its base goes
                    if t in table:
                        found += [getattr(owner, name) for name in table[t]]
                        break
            self._by_type[etype] = found
        return found

    def deliver(self, event: Any) -> bool:
        """Hand `event` to every handler marked for its type; False when nobody shows it."""
        found = self.handlers(type(event))
        for handler in found:
            handler(event)
        return bool(found)
