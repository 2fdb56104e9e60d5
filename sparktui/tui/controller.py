"""The one object between the TUI and the core: owns the Cluster, the deployer and the transfers.

It subscribes to the core's EventBus and the Journal and hands what they report, as it is, to the
screen in one Textual message (messages.CoreEvent) through `post` (App.post_message, safe from any thread). Textual is imported only when a
message is built: `sparktui` starts the probes (prestart) before it loads the screen's code. Widgets never reach the
network; the app calls these coroutines from async workers on its own loop.

Tests inject a controller of their own (a scripted core, or one wired to in-process SSH servers):
anything with this class's methods works.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..core.config.config import Config
from ..core.state.events import ConnectionChanged, EventBus, LogLines, NodeUpdated
from ..core.nodes.facts import NodeFacts
from ..core.plan.image import inspect_configured
from ..core.plan.support import support_configured
from ..core.nodes.inventory import Inventory
from ..core.state.journal import Entry, Journal, default_journal_path
from ..core.state import labels as L
from .corethread import CoreThread

if TYPE_CHECKING:  # names for annotations only: Textual loads when the first message is built
    from textual.message import Message

    from ..core.deploy.operations import Choices, Op, Operations, Prepared

Post = Callable[["Message"], Any]
Make = Callable[[], "Message | None"]  # builds a message when it is handed over (Textual loaded by then)
POLL_INTERVAL = 30.0  # seconds between inventory rounds; a round starts only after the last one ended


_CORE = __name__.rsplit(".", 2)[0] + ".core."  # events the core's own modules define


@dataclass
class InventoryRound:
    """A whole inventory round finished: facts for every node plus the subnets joining them."""

    inventory: Any
    model_config: dict | None = None  # the model's config.json (the form checks TP against its heads)
    last_subnet: str | None = None  # the subnet the deployment's last launch used: part of the fabric


@dataclass
class LogDrain:
    """Every LogLines batch queued since the last drain was handled: a flood is one message in the
    screen's queue, so a key press never waits behind it."""

    take: Callable[[], list]  # every batch queued so far; lets the next drain be posted


def _messages() -> Any:
    """The message classes, imported when a message is first built: on the screen's thread for what
    came early (attach), so two threads never import Textual at once (its modules import each other,
    and a second thread would meet one half made)."""
    from . import messages

    return messages


class Controller:
    """Real core: SSH to the configured nodes, inventory polls, deployer and transfers."""

    def __init__(
        self,
        config: Config,
        *,
        journal: Journal | None = None,
        cluster: Any = None,
        deployer_factory: Callable[..., Any] | None = None,
        poll_interval: float = POLL_INTERVAL,
        transfer_opts: Any = None,
        threaded: bool = True,
    ) -> None:
        self.config = config
        self.journal = journal if journal is not None else Journal(default_journal_path())
        self.bus = EventBus()
        self.cluster = cluster
        self.poll_interval = poll_interval
        self.transfer_opts = transfer_opts
        self._deployer_factory = deployer_factory
        self.ops: Operations | None = None
        self._images: dict = {}  # image ref -> ImageInfo: what the head last said each engine image holds
        self._post: Post = lambda m: None
        self._unsubscribe: Callable[[], None] | None = None
        self._poller: asyncio.Task | None = None
        self._logs: list[LogLines] = []
        self._logs_posted = False
        self._logs_lock = threading.Lock()  # the bus emits on the core thread
        self._flows: weakref.WeakSet = weakref.WeakSet()  # the log readers' gates seen so far (for brake)
        self._core = CoreThread() if threaded else None  # SSH work off the screen's loop (see corethread.py)
        self._closed = False
        self._early: list[Make] | None = []  # what the core said before the screen attached
        self._early_lock = threading.Lock()
        self._early_start: Any = None  # the start begun by prestart(), a concurrent future
        self._rounds_begun = 0  # inventory rounds begun so far: each round's number
        self._round_landed = 0  # the newest round whose inventory was told
        self._node_told: dict[str, int] = {}  # node -> the newest round that told its facts

    # -- wiring -----------------------------------------------------------------------------
    def _listen(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.bus.subscribe(self._forward)
            self.journal.listeners.append(self._journaled)

    def prestart(self) -> None:
        """Connect and probe now, on the core thread, while the screen is still being built; what
        the core reports meanwhile is kept and handed over by attach()."""
        if self._core is None or self._early_start is not None:
            return
        self._listen()
        # what the core thread imports on the way is imported here first, for the same reason
        from ..core.deploy import operations  # noqa: F401
        from ..core.remote.ssh import Cluster  # noqa: F401

        self._core.start()
        self._early_start = asyncio.run_coroutine_threadsafe(self._start(), self._core.loop)

    def _say(self, make: Make) -> None:
        """Hand a message to the screen; before it attaches, keep how to build it (in order)."""
        with self._early_lock:
            if self._early is not None:
                self._early.append(make)
                return
        msg = make()
        if msg is not None:
            self._post(msg)

    def attach(self, post: Post) -> None:
        """Start forwarding core events and journal entries to `post`."""
        self._listen()
        with self._early_lock:  # in order: what came early first, then the rest
            for make in self._early or []:
                msg = make()
                if msg is not None:
                    post(msg)
            self._early = None
            self._post = post

    def _forward(self, event: Any) -> None:
        if isinstance(event, LogLines):
            self._queue_lines(event)
        elif type(event).__module__.startswith(_CORE):  # anything else on the bus is not the screen's
            self._core_event(event)

    def _core_event(self, event: Any) -> None:
        self._say(lambda: _messages().CoreEvent(event))

    def _queue_lines(self, event: LogLines) -> None:
        # Held until the log view has it (back-pressure on the reader). Coalesced: at most one
        # LogDrain waits in the app's queue; later batches join it.
        event.hold()
        with self._logs_lock:
            if event.flow is not None:
                self._flows.add(event.flow)
            self._logs.append(event)
            if self._logs_posted:
                return
            self._logs_posted = True
        self._core_event(LogDrain(self._take_logs))

    def brake_logs(self, on: bool) -> None:
        """Keys first: hold every log reader back while the screen answers a key (they share one
        interpreter lock with it); the app lets them go on a timer, a few frames later."""
        with self._logs_lock:
            flows = list(self._flows)
        for gate in flows:
            gate.brake(on)

    def _take_logs(self) -> list[LogLines]:
        """Called by the log view when it handles a LogDrain: everything queued so far."""
        with self._logs_lock:
            batches, self._logs = self._logs, []
            self._logs_posted = False
        return batches

    def _journaled(self, entry: Entry) -> None:
        self._core_event(entry)

    def _link(self, node: Any) -> None:
        self.bus.emit(ConnectionChanged(node.name, node.connected, node.error))

    # -- facts ------------------------------------------------------------------------------
    async def _start(self) -> None:
        """Connect to and probe every node at once (each card filled as its node answers: a probe
        connects first, then is one round trip), pick up a running deployment, then poll."""
        from ..core.remote.ssh import Cluster

        if self.cluster is None:
            self.cluster = Cluster(self.config, self.journal, on_change=self._link)
        inv = await self._refresh(first=True)
        if any(c.labels.get(L.DEPLOYMENT) for f in inv.facts.values() for c in f.containers):
            with contextlib.suppress(Exception):  # nothing to follow is not an error at start-up
                await self._get_deployer().reattach()
        self._poller = asyncio.ensure_future(self._poll())

    async def _refresh(self, first: bool = False) -> Inventory:
        """One inventory round. Rounds overlap (the poll, the end of a copy, ctrl+r); a round that began
        earlier but ends later holds older facts, so it never replaces what a later round already told."""
        from ..core.nodes.inventory import take_inventory

        self._rounds_begun += 1
        seq = self._rounds_begun

        def answered(node: Any, facts: NodeFacts) -> None:
            if first:
                self._link(node)
            if seq >= self._node_told.get(facts.name, 0):
                self._node_told[facts.name] = seq
                self.bus.emit(NodeUpdated(facts))

        inv = await take_inventory(self.cluster, self.config, on_facts=answered)
        if seq < self._round_landed:
            return self.inventory or inv
        self._round_landed = seq
        self.inventory = inv
        await self._read_model_config()
        ops = self._ops()

        async def tell() -> None:
            subnet = await ops.last_subnet()  # asked first: a later round may land while it is read
            if seq == self._round_landed:  # else a later round has told newer facts (and learns its own)
                self._inventory_changed(inv, ops.model_config, subnet)

        await tell()
        # the engine release in each image, for the launch form: asked once per image ID, then cached
        if await inspect_configured(self.cluster, self.config, inv.facts, self._images):
            await tell()
        # whether each image loads the model (asked of the image once per inspection): the form's line
        if await support_configured(self.cluster, self.config, inv.facts):
            await tell()
        return inv

    def _inventory_changed(self, inv: Inventory, model_config: Any, subnet: Any) -> None:
        self._core_event(InventoryRound(inv, model_config, subnet))

    async def _refresh_quietly(self) -> None:
        """A fresh inventory after an operation changed the nodes; a failed probe waits for the next poll."""
        with contextlib.suppress(Exception):
            await self._refresh()

    async def _poll(self) -> None:
        # Re-armed only after a round ends, so a slow node never piles rounds up.
        while True:
            await asyncio.sleep(self.poll_interval)
            with contextlib.suppress(Exception):
                await self._refresh()

    # -- operations: the core's, prepared and run the same way as on the command line -----------
    @property
    def inventory(self) -> Inventory | None:
        """The freshest inventory, kept once, by the operations (core-thread state: the app gets it
        inside messages)."""
        return self.ops.inventory if self.ops is not None else None

    @inventory.setter
    def inventory(self, inv: Inventory | None) -> None:
        self._ops().inventory = inv

    def _ops(self) -> Operations:
        if self.ops is None:
            from ..core.deploy.operations import Operations

            self.ops = Operations(
                self.cluster,
                self.config,
                self.bus,
                deployer_factory=self._deployer_factory,
                transfer_opts=self.transfer_opts,
            )
        return self.ops

    def _get_deployer(self) -> Any:
        return self._ops().deployer()

    async def _read_model_config(self) -> None:
        """The model's config.json, once: the form's live preview checks TP against its heads too."""
        source = self.inventory.facts.get(self.config.model.source or self.config.head.name) if self.inventory else None
        present = source is not None and source.model is not None and source.model.present
        if self._ops().model_config is None and present:
            with contextlib.suppress(Exception):
                from ..core.plan.plan import PlanOptions

                await self._ops()._read_model_config(PlanOptions())

    async def _prepare(self, op: Op | str, choices: Choices | None = None) -> Prepared:
        return await self._ops().prepare(op, choices)

    async def _preflight(self, prepared: Prepared) -> Any:
        from ..core.deploy.operations import PREFLIGHT_TIMEOUT

        return await self._ops().preflight(prepared, PREFLIGHT_TIMEOUT)

    async def _run_prepared(self, prepared: Prepared, force: bool = False, breaking: Any = None) -> str:
        try:
            return await self._ops().run(prepared, force=force, breaking=breaking)
        finally:
            await self._refresh_quietly()  # the cards show the new containers, the form the copies

    async def _drop_caches(self, names: list[str]) -> list[Any]:
        from ..core.memory.free import drop_caches

        results = await asyncio.gather(*(drop_caches(self.cluster[n]) for n in names))
        await self._refresh_quietly()  # the plan checks read the fresh free memory
        return list(results)

    # -- what the app calls (each runs on the core loop) -----------------------------------------
    async def _run(self, coro: Any) -> Any:
        if self._core is None:
            return await coro
        return await self._core.call(coro)

    async def start(self) -> None:
        """Connect to every node, take the first inventory, pick up a running deployment, then poll."""
        if self._early_start is not None:  # begun by prestart(): wait for that one
            begun, self._early_start = self._early_start, None
            await asyncio.wrap_future(begun)
            return
        await self._run(self._start())

    async def refresh(self) -> Inventory:
        return await self._run(self._refresh())

    async def prepare(self, op: Op | str, choices: Choices | None = None) -> Prepared:
        """Fresh facts, the model's config, the plan and its checks, what stops and starts where."""
        return await self._run(self._prepare(op, choices))

    async def preflight(self, prepared: Prepared) -> Any:
        """The rendezvous check of a prepared launch, pivot or redeploy (rows arrive as messages)."""
        return await self._run(self._preflight(prepared))

    async def run(self, prepared: Prepared, force: bool = False, breaking: Any = None) -> str:
        """Run what was prepared (and confirmed); force: past a failed preflight; breaking: the lock
        holder shown to the user and agreed to break."""
        return await self._run(self._run_prepared(prepared, force, breaking))

    async def remove_stale(self, stale: dict[str, list[str]]) -> list[dict]:
        """Remove the stale containers a preflight named (node -> names), once the user agreed."""
        return await self._run(self._ops().remove_stale(stale))

    async def drop_caches(self, names: list[str]) -> list[Any]:
        """Flush the page cache on these nodes (the CLI's drop-caches), then probe again: each Dropped."""
        return await self._run(self._drop_caches(names))

    async def _bench(self, workload: Any, on_progress: Callable[[Any], None]) -> tuple[list, list]:
        from ..core.bench import results
        from ..core.bench.run import run_on_deployment
        from ..core.engines.common import safe_name

        name = safe_name(self.config.cluster)
        rows = await run_on_deployment(self.cluster, self.config, name, workload, on_progress)
        return rows, results.beside(results.load(deployment=name)[0], name)[1]

    async def bench(self, workload: Any, on_progress: Callable[[Any], None]) -> tuple[list, list]:
        """`sparktui bench` on the deployment: (its rows, the previous engine's rows); cancelling stops the
        client on the head. on_progress is called on the core thread."""
        return await self._run(self._bench(workload, on_progress))

    # -- shutdown ---------------------------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._run(self._close())
        finally:
            if self._core is not None:
                self._core.stop()

    def abandon(self) -> None:
        """Stop what prestart() began when no screen will attach (closes the links, from any thread)."""
        if self._core is None or not self._core.running or self._closed:
            return
        self._closed = True
        if self._early_start is not None:
            self._early_start.cancel()  # the first round may still be dialling: it stops there
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), self._core.loop).result(10)
        self._core.stop()

    async def _close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        if self._unsubscribe is not None:
            self._unsubscribe()
        with contextlib.suppress(ValueError):
            self.journal.listeners.remove(self._journaled)
        if self.ops is not None:
            with contextlib.suppress(Exception):
                await self.ops.close()
        if self.cluster is not None:
            await self.cluster.close()
