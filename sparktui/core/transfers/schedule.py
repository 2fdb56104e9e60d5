"""Who sends to whom: the fan-out of one copy to many nodes. Pure, no I/O.

Every node that holds a verified copy becomes a sender, so N nodes are served in about log2(N)
rounds instead of N. Each sender runs at most `per_source` transfers at once; a waiting node goes
to the sender with the fewest running, then the fewest served so far (a fresh copy before the
original, which spreads the reads), never over a pair marked unusable (no trust between them).

A node's streams share its one link. With `per_source=1` (the default) each copy gets a whole
link and the holders double every round: ceil(log2 N) rounds for N nodes. Two streams per sender
halve each stream's speed, so the first copies land later and the doubling starts later.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FanOut:
    source: str
    dests: list[str]
    per_source: int = 1
    waiting: list[str] = field(init=False)
    running: dict[str, str] = field(init=False, default_factory=dict)  # dest -> sender
    done: list[str] = field(init=False, default_factory=list)
    failed: list[str] = field(init=False, default_factory=list)
    blocked: set[tuple[str, str]] = field(init=False, default_factory=set)  # (sender, dest) pairs not to use
    _active: dict[str, int] = field(init=False, default_factory=dict)
    _served: dict[str, int] = field(init=False, default_factory=dict)
    _order: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.per_source = max(1, self.per_source)
        self.waiting = [d for d in dict.fromkeys(self.dests) if d != self.source]
        self._add_sender(self.source)

    def _add_sender(self, name: str) -> None:
        self._active[name] = 0
        self._served.setdefault(name, 0)
        self._order.append(name)

    def add_sender(self, name: str) -> None:
        """A node that got its copy some other way (a transfer already running when we started)."""
        if name not in self._active:
            self._add_sender(name)
        if name in self.waiting:
            self.waiting.remove(name)

    @property
    def senders(self) -> list[str]:
        return list(self._order)

    def next(self) -> list[tuple[str, str]]:
        """Pairs (sender, dest) to start now; they count as running from here on."""
        out = []
        for dest in list(self.waiting):
            free = [s for s in self._order if self._active[s] < self.per_source and (s, dest) not in self.blocked]
            if not free:
                continue
            # fewest running, then fewest served, then the most recent copy
            sender = min(free, key=lambda s: (self._active[s], self._served[s], -self._order.index(s)))
            self._active[sender] += 1
            self._served[sender] += 1
            self.waiting.remove(dest)
            self.running[dest] = sender
            out.append((sender, dest))
        return out

    def finished(self, dest: str, ok: bool) -> None:
        sender = self.running.pop(dest)
        self._active[sender] -= 1
        if ok:
            self.done.append(dest)
            self._add_sender(dest)
        else:
            self.failed.append(dest)

    def block(self, sender: str, dest: str) -> None:
        """The pair cannot be used: put dest back in line for another sender."""
        self.blocked.add((sender, dest))
        if self.running.get(dest) == sender:
            del self.running[dest]
            self._active[sender] -= 1
            self._served[sender] -= 1
            self.waiting.insert(0, dest)

    def stranded(self) -> list[str]:
        """Waiting nodes no sender can ever serve (nothing runs that could add a sender)."""
        if self.running:
            return []
        return [d for d in self.waiting if all((s, d) in self.blocked for s in self._order)]

    @property
    def complete(self) -> bool:
        return not self.running and (not self.waiting or bool(self.stranded()))
