"""The one object between the TUI and the core: owns the Cluster, the deployer and the transfers.

It subscribes to the core's EventBus and the Journal, and turns what they report into Textual
messages through `post` (App.post_message, safe from any thread). Widgets never reach the
network; the app calls these coroutines from async workers on its own loop.

Tests inject a controller of their own (a scripted core, or one wired to in-process SSH servers):
anything with this class's methods works.
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from textual.message import Message

from ..core.config import Config
from ..core.events import ConnectionChanged, EventBus, LogLines, NodeUpdated
from ..core.facts import NodeFacts, Subnet
from ..core.inventory import Inventory
from ..core.journal import Entry, Journal, default_journal_path
from ..core.plan import Plan, PlanOptions, make_plan
from .corethread import CoreThread
from .messages import InventoryChanged, JournalAdded, LogsArrived, to_message

Post = Callable[[Message], Any]
POLL_INTERVAL = 30.0  # seconds between inventory rounds; a round starts only after the last one ended


@dataclass
class OpPreview:
    """What a dangerous operation will do, for its confirmation: which containers stop and start on which node."""

    title: str
    stops: list[tuple[str, str]] = field(default_factory=list)  # (node, container and its state)
    starts: list[tuple[str, str]] = field(default_factory=list)  # (node, what starts there)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Node by node: what stops there, then what starts there."""
        nodes = list(dict.fromkeys([n for n, _ in self.stops] + [n for n, _ in self.starts]))
        out = []
        for node in nodes:
            out.append(f"{node}:")
            out += [f"  stop  {c}" for n, c in self.stops if n == node]
            out += [f"  start {w}" for n, w in self.starts if n == node]
        return out + self.notes


@dataclass
class Prepared:
    """An operation checked and planned, not yet run: confirming runs exactly this plan."""

    op: str  # stop | pivot | redeploy | replace
    preview: OpPreview
    plan: Plan | None = None
    options: PlanOptions | None = None


def starts_of(plan: Plan) -> list[tuple[str, str]]:
    return [(n.name, f"{n.container} ({plan.engine} {plan.mode} {n.role}, {plan.image})") for n in plan.nodes]


def plan_notes(plan: Plan) -> list[str]:
    return [f"error: {e}" for e in plan.errors] + [f"warning: {w}" for w in plan.warnings[:3]]


class Controller:
    """Real core: SSH to the configured nodes, inventory polls, deployer and transfers."""

    def __init__(self, config: Config, *, journal: Journal | None = None, cluster: Any = None,
                 deployer_factory: Callable[..., Any] | None = None, poll_interval: float = POLL_INTERVAL,
                 transfer_opts: Any = None, threaded: bool = True) -> None:
        self.config = config
        self.journal = journal if journal is not None else Journal(default_journal_path())
        self.bus = EventBus()
        self.cluster = cluster
        self.poll_interval = poll_interval
        self.transfer_opts = transfer_opts
        self._deployer_factory = deployer_factory
        self.deployer: Any = None
        self.inventory: Inventory | None = None
        self.plan: Plan | None = None  # the last plan launched by this run of the app
        self.options: PlanOptions | None = None  # and the options it came from
        self._post: Post = lambda m: None
        self._unsubscribe: Callable[[], None] | None = None
        self._poller: asyncio.Task | None = None
        self._logs: list[LogLines] = []
        self._logs_posted = False
        self._logs_lock = threading.Lock()  # the bus emits on the core thread
        self._core = CoreThread() if threaded else None  # SSH work off the screen's loop (see corethread.py)
        self._closed = False
        self._early: list[Message] | None = []  # what the core said before the screen attached
        self._early_lock = threading.Lock()
        self._early_start: Any = None  # the start begun by prestart(), a concurrent future

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
        self._post = self._keep_early
        self._listen()
        self._core.start()
        self._early_start = asyncio.run_coroutine_threadsafe(self._start(), self._core.loop)

    def _keep_early(self, msg: Message) -> None:
        with self._early_lock:
            if self._early is not None:
                self._early.append(msg)
                return
        self._post(msg)

    def attach(self, post: Post) -> None:
        """Start forwarding core events and journal entries to `post`."""
        self._listen()
        with self._early_lock:  # in order: what came early first, then the rest
            for msg in self._early or []:
                post(msg)
            self._early = None
            self._post = post

    def _forward(self, event: Any) -> None:
        if isinstance(event, LogLines):
            self._queue_lines(event)
            return
        msg = to_message(event)
        if msg is not None:
            self._post(msg)

    def _queue_lines(self, event: LogLines) -> None:
        # Held until the log view has it (back-pressure on the reader). Coalesced: at most one
        # LogsArrived waits in the app's queue; later batches join it.
        event.hold()
        with self._logs_lock:
            self._logs.append(event)
            if self._logs_posted:
                return
            self._logs_posted = True
        self._post(LogsArrived(self._take_logs))

    def _take_logs(self) -> list[LogLines]:
        """Called by the app when it handles LogsArrived: everything queued so far."""
        with self._logs_lock:
            batches, self._logs = self._logs, []
            self._logs_posted = False
        return batches

    def _journaled(self, entry: Entry) -> None:
        self._post(JournalAdded(entry))

    def _link(self, node: Any) -> None:
        self.bus.emit(ConnectionChanged(node.name, node.connected, node.error))

    # -- facts ------------------------------------------------------------------------------
    @property
    def facts(self) -> dict[str, NodeFacts]:
        return self.inventory.facts if self.inventory else {}

    @property
    def subnets(self) -> list[Subnet]:
        return self.inventory.subnets if self.inventory else []

    async def _start(self) -> None:
        """Connect to and probe every node at once (each card filled as its node answers: a probe
        connects first, then is one round trip), pick up a running deployment, then poll."""
        from ..core.ssh import Cluster

        if self.cluster is None:
            self.cluster = Cluster(self.config, self.journal, on_change=self._link)
        inv = await self._refresh(first=True)
        if any(c.labels.get("sparktui.deployment") for f in inv.facts.values() for c in f.containers):
            with contextlib.suppress(Exception):  # nothing to follow is not an error at start-up
                await self._get_deployer().reattach()
        self._poller = asyncio.ensure_future(self._poll())

    async def _refresh(self, first: bool = False) -> Inventory:
        from ..core.inventory import take_inventory

        def answered(node: Any, facts: NodeFacts) -> None:
            if first:
                self._link(node)
            self.bus.emit(NodeUpdated(facts))

        inv = await take_inventory(self.cluster, self.config, on_facts=answered)
        self.inventory = inv
        self._post(InventoryChanged(inv))
        return inv

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

    # -- plans and deployments ----------------------------------------------------------------
    def make_plan(self, opts: PlanOptions) -> Plan:
        return make_plan(self.config, self.facts, self.subnets, opts)

    def _get_deployer(self) -> Any:
        if self.deployer is None:
            factory = self._deployer_factory
            if factory is None:
                try:
                    from ..core.deploy import Deployer as factory  # noqa: N813
                except ImportError as e:
                    raise RuntimeError(f"deployments are not available in this build ({e})") from None
            self.deployer = factory(self.cluster, self.config, self.bus)
        return self.deployer

    async def _launch(self, plan: Plan, options: PlanOptions | None = None, replace: bool = False) -> None:
        """Run the plan. Containers of another launch raise DeploymentExists unless `replace`."""
        if not plan.ok:
            raise ValueError("the plan has errors: " + "; ".join(plan.errors))
        self.plan, self.options = plan, options
        await self._get_deployer().launch(plan, options, if_exists="replace" if replace else "ask")
        await self._refresh_quietly()  # the cards show the new containers

    async def _stops(self) -> list[tuple[str, str]]:
        found = await self._get_deployer().existing()
        out = []
        for f in found.values():
            if f.error:
                out.append((f.node, f"? (cannot ask: {f.error})"))
            out += [(f.node, f"{c.name} ({c.state})") for c in f.containers]
        return out

    async def _prepare(self, op: str) -> Prepared:
        """Plan stop / pivot / redeploy without running it, so the user sees what stops and starts where."""
        d = self._get_deployer()
        stops = await self._stops()
        if op == "stop":
            return Prepared(op, OpPreview(f"Stop deployment {d.name}", stops))
        if op == "pivot":
            opts, plan = await d.plan_pivot()
            title = f"Pivot {d.name} to {plan.engine} ({plan.mode})"
        elif op == "redeploy":
            opts, plan = await d.plan_redeploy()
            title = f"Redeploy {d.name} ({plan.engine} {plan.mode})"
        else:
            raise ValueError(f"unknown operation {op!r}")
        return Prepared(op, OpPreview(title, stops, starts_of(plan), plan_notes(plan)), plan, opts)

    async def _relaunch(self, prepared: Prepared) -> None:
        """Stop what runs, then launch the prepared plan (refused before anything stops if it has errors)."""
        assert prepared.plan is not None
        await self._get_deployer().relaunch(prepared.plan, prepared.options)
        self.plan, self.options = prepared.plan, prepared.options
        await self._refresh_quietly()

    async def _stop(self) -> str:
        removed = await self._get_deployer().stop()
        await self._refresh_quietly()
        return f"removed {removed} container(s)"

    # -- transfers --------------------------------------------------------------------------
    def _subnet(self) -> str | None:
        return self.plan.subnet if self.plan else None

    async def _sync_model(self, dests: list[str] | None = None) -> str:
        from ..core.transfers import sync_model

        outs = await sync_model(self.cluster, self.config, dests, emit=self.bus.emit, opts=self.transfer_opts,
                                subnet=self._subnet())
        await self._refresh_quietly()  # the copies change what the form may offer
        return "; ".join(f"{o.dest}: {o.message}" for o in outs) or "every node already has the model"

    async def _sync_image(self, engine: str | None = None) -> str:
        from ..core.transfers import sync_image

        which = engine or (self.plan.engine if self.plan else "sglang")
        outs = await sync_image(self.cluster, self.config, which, emit=self.bus.emit, opts=self.transfer_opts,
                                subnet=self._subnet())
        await self._refresh_quietly()
        return "; ".join(f"{o.dest}: {o.message}" for o in outs)

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

    async def launch(self, plan: Plan, options: PlanOptions | None = None, replace: bool = False) -> None:
        """Run the plan. Containers of another launch raise DeploymentExists unless `replace`."""
        await self._run(self._launch(plan, options, replace))

    async def prepare(self, op: str) -> Prepared:
        """Plan stop / pivot / redeploy without running it, so the user sees what stops and starts where."""
        return await self._run(self._prepare(op))

    async def relaunch(self, prepared: Prepared) -> None:
        """Stop what runs, then launch the prepared plan (refused before anything stops if it has errors)."""
        await self._run(self._relaunch(prepared))

    async def stop(self) -> str:
        return await self._run(self._stop())

    async def sync_model(self, dests: list[str] | None = None) -> str:
        return await self._run(self._sync_model(dests))

    async def sync_image(self, engine: str | None = None) -> str:
        return await self._run(self._sync_image(engine))

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

    async def _close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        if self._unsubscribe is not None:
            self._unsubscribe()
        with contextlib.suppress(ValueError):
            self.journal.listeners.remove(self._journaled)
        closer = getattr(self.deployer, "close", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer()
        if self.cluster is not None:
            await self.cluster.close()
