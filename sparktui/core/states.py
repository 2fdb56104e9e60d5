"""A deployment's states, as one enum (a str, so JSON and older comparisons read the plain word)."""
from __future__ import annotations

from enum import Enum


class State(str, Enum):
    IDLE = "idle"  # nothing launched or found yet
    STARTING = "starting"  # steps running on the nodes
    LOADING = "loading"  # the engine is loading weights
    READY = "ready"  # the endpoint answered a chat completion
    UNHEALTHY = "unhealthy"  # was ready; the endpoint stopped answering its health check
    WEDGED = "wedged"  # was ready; /health answers but no token comes out (core/liveness.py)
    FAILED = "failed"
    HUNG = "hung"  # silent in distributed init past the hang threshold
    STOPPING = "stopping"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value

    def __hash__(self) -> int:  # as the plain word's, so dicts keyed by the word find it
        return hash(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def settled(self) -> bool:
        return self in SETTLED

    @property
    def bad(self) -> bool:
        return self in (State.FAILED, State.HUNG, State.UNHEALTHY, State.WEDGED)


SETTLED = (State.READY, State.FAILED, State.HUNG, State.STOPPED)
