"""One engine's log reading, put together once: its own lines (on its Engine) and the engine-neutral signs.

diagnose.py reads a log through this, so a line is tried only against what can mean something in that
engine's log, without asking per line which engine a sign belongs to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..diagnosis import quickre
from .logsigns import ALL, SIGNS, Sign

if TYPE_CHECKING:
    from .base import Engine


@dataclass(frozen=True)
class LogRules:
    dist_begin: quickre.Quick | None  # opens distributed init: silence after it is the rendezvous hang
    dist_end: quickre.Quick | None  # closes it
    ready: quickre.Quick  # the server is up
    signs: tuple[Sign, ...]  # the engine's own first, so its hint wins where a shared one matches too

    @property
    def patterns(self) -> tuple[quickre.Quick, ...]:
        """Its lines and every sign it tries (the batch prefilter takes the shared progress lines besides)."""
        lines = tuple(p for p in (self.dist_begin, self.dist_end, self.ready) if p is not None)
        return lines + tuple(s.pattern for s in self.signs)


def compile_rules(engine: Engine) -> LogRules:
    ready = engine.ready_sign or quickre.compile(re.escape(engine.ready_line))
    # ALL by identity: an engine being registered is not in the registry yet
    shared = tuple(s for s in SIGNS if s.engines is ALL or engine.name in s.engines)
    return LogRules(engine.dist_begin, engine.dist_end, ready, tuple(engine.signs) + shared)
