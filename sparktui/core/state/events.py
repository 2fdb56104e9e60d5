"""The events the core emits. The TUI turns them into messages; the CLI prints them.

Plain dataclasses, no UI types: data flows remote process -> core -> event -> UI.
Modules may add their own events here; keep each small and documented.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..nodes.facts import NodeFacts
from ..memory.sample import MemSample
from .states import State

if TYPE_CHECKING:  # deployment.py reads the plan: events stay light to import
    from .deployment import Deployment


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


class Gate:
    """Back-pressure for one log stream. A consumer that takes batches later, on another thread
    (the screen), holds each batch and acks it once taken; the reader stops reading while more than
    `limit` of its lines are held, so a slow screen slows the stream instead of growing queues.
    While braked (a key is being answered) the reader stops as soon as any line is held: the reader's
    thread shares the interpreter with the screen's, and a key's frame should not wait behind it."""

    def __init__(self, limit: int = 8192) -> None:
        self.limit = limit
        self.held = 0
        self.braked = False
        self._lock = threading.Lock()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future] | None = None

    @property
    def over(self) -> bool:
        """Whether the reader should wait before reading more."""
        return self.held > (0 if self.braked else self.limit)

    def brake(self, on: bool) -> None:
        """Hold the reader back while the consumer answers a key (on), or let it go again (off)."""
        with self._lock:
            self.braked = on
            waiter = self._waiter
            if on or waiter is None or self.held > self.limit // 2:
                return
            self._waiter = None
        loop, fut = waiter
        loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))

    def hold(self, n: int) -> Callable[[], None]:
        with self._lock:
            self.held += n
        done = False

        def ack() -> None:
            nonlocal done
            if not done:
                done = True
                self._release(n)

        return ack

    def _release(self, n: int) -> None:
        with self._lock:
            self.held -= n
            waiter = self._waiter
            if waiter is None or self.held > (0 if self.braked else self.limit // 2):
                return
            self._waiter = None
        loop, fut = waiter
        loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))

    async def wait(self, timeout: float = 10.0) -> bool:
        """Return once the consumer has caught up (at once if it has); False after `timeout` seconds,
        so a consumer that went away never stops the stream for good."""
        with self._lock:
            if not self.over:
                return True
            fut = asyncio.get_running_loop().create_future()
            self._waiter = (asyncio.get_running_loop(), fut)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            with self._lock:
                if self._waiter is not None and self._waiter[1] is fut:
                    self._waiter = None


@dataclass
class LogLines:
    """A batch of output lines from one node's process or container."""

    node: str
    source: str  # e.g. container name
    lines: list[str] = field(default_factory=list)
    stamps: list[int | None] | None = None  # docker's time per line (unix ns), None where unknown
    flow: Gate | None = field(default=None, repr=False, compare=False)  # the reader's back-pressure
    ack: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def hold(self) -> Callable[[], None] | None:
        """A consumer that will take these lines later calls this now and `ack()` once it has them."""
        if self.flow is not None and self.ack is None:
            self.ack = self.flow.hold(len(self.lines))
        return self.ack


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
    streams: list[dict] | None = None  # parallel rsync streams: n, bytes, percent, rate, done (rc)
    cipher: str | None = None  # what the copy's ssh encrypts with


@dataclass(frozen=True)
class DeploymentChanged:
    """Where a deployment (the engine containers of one launch) stands: the Deployer's snapshot itself
    (core/state/deployment.py), which no one changes once it is sent (a change is a new snapshot and a
    new event). A front holds it as it is; the properties read the fields most readers want."""

    deployment: Deployment

    @property
    def id(self) -> str:  # its name (container label sparktui.deployment)
        return self.deployment.deployment

    @property
    def engine(self) -> str:
        return self.deployment.engine

    @property
    def mode(self) -> str:
        return self.deployment.mode

    @property
    def state(self) -> State:  # the Deployer's (never IDLE, PREFLIGHT or REFUSED)
        return self.deployment.state

    @property
    def detail(self) -> str:  # plain words: the step running, the problem, ...
        return self.deployment.detail

    @property
    def endpoint(self) -> str | None:
        """http://HEAD:PORT/v1 while ready (the snapshot keeps a known one past that: it was, not is)."""
        return self.deployment.endpoint if self.state == State.READY else None


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


@dataclass
class PreflightStarted:
    """The rendezvous check began on these nodes (rank order), at the plan's head address."""

    deployment: str
    nodes: list[str]
    subnet: str | None
    addr: str | None
    image: str


@dataclass
class PreflightNode:
    """One node's row of the check: a preflight.NodeResult (transport, seconds, bandwidth, verdict)."""

    deployment: str
    result: Any


@dataclass
class PreflightStage:
    """What a node's check waits for now: "starting" (its check container) or "rendezvous"."""

    deployment: str
    node: str
    stage: str


@dataclass
class PreflightFinished:
    """The check's verdict (a preflight.Verdict; None when it could not run) and its summary."""

    deployment: str
    verdict: Any
    summary: str


@dataclass
class ServingStats:
    """A ready deployment's serving metrics after a scrape (core/serving/metrics.py Serving.to_json, and the
    recent per-scrape series for sparklines), or why there are none (`unavailable`)."""

    deployment: str
    stats: dict
    series: dict = field(default_factory=dict)  # generation_tokens / prompt_tokens (tok/s), kv_cache_usage ...
    unavailable: str | None = None
    cannot_tell: str | None = None  # a silent probe these metrics cannot judge (core/serving/liveness.py)


@dataclass
class EndpointHealth:
    """A health poll of a ready deployment's endpoint: ok, or why not (an engine that died shows here)."""

    deployment: str
    endpoint: str
    ok: bool
    detail: str = ""


@dataclass
class NodeMemory:
    """A node's memory while a deployment starts or serves (core/memory), with the guard's verdict.

    level: "ok", "warn" (inside the band above the floor), "stop" (the guard stops the deployment),
    or "unwatched" (this reading failed or the node cannot say: never a reason to stop)."""

    deployment: str
    sample: MemSample
    level: str
    detail: str = ""
