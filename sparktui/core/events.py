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


@dataclass
class TransferProgress:
    """Where one transfer (model rsync or image save|load) between two nodes stands."""

    id: str  # state directory name on the source node
    kind: str  # model | image
    source: str  # node sending
    dest: str  # node receiving
    state: str  # preparing | running | verifying | done | failed | cancelled | lost
    bytes: int = 0  # bytes handled so far
    total_bytes: int | None = None  # expected bytes, when known
    percent: float | None = None  # 0-100
    rate: float | None = None  # bytes per second
    eta: float | None = None  # seconds left, when known
    elapsed: float | None = None  # seconds since start
    files_done: int | None = None  # files transferred (rsync xfr#)
    files_left: int | None = None  # files still to check (rsync to-chk R)
    files_total: int | None = None  # files known so far (rsync to-chk T; grows while listing)
    message: str | None = None  # plain words: why it failed, what was verified, what to do


DEPLOYMENT_STATES = ("starting", "loading", "ready", "failed", "hung", "stopping", "stopped")


@dataclass
class DeploymentChanged:
    """Where a deployment (the engine containers of one launch) stands."""

    id: str  # deployment name (container label sparktui.deployment)
    engine: str  # sglang | vllm
    mode: str  # native | ray
    state: str  # one of DEPLOYMENT_STATES
    detail: str = ""  # plain words: the step running, the problem and its hint, ...
    endpoint: str | None = None  # http://HEAD:PORT/v1 once ready


@dataclass
class LaunchStep:
    """One step of a launch plan on one node: started, done, skipped (already there) or failed."""

    deployment: str
    node: str
    index: int  # 0-based position in the plan's global order
    total: int
    kind: str  # run | exec | wait
    description: str
    state: str  # running | waiting | done | skipped | failed
    detail: str = ""  # the container id, why it was skipped, what a wait step's poll answered, the error


@dataclass
class EndpointChecked:
    """The OpenAI-compatible endpoint answered a short chat completion (readiness proof)."""

    deployment: str
    endpoint: str  # as the nodes see it: http://HEAD:PORT/v1
    local: str  # through this machine's SSH forward: http://127.0.0.1:N/v1
    model: str  # the id /v1/models listed
    latency_s: float  # request to full answer
    completion_tokens: int
    tokens_per_s: float | None
    reply: str = ""  # the answer's text (short)
