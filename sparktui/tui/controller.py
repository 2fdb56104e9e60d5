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
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from textual.message import Message

from ..core.config import Config
from ..core.events import ConnectionChanged, EventBus, NodeUpdated
from ..core.facts import NodeFacts, Subnet
from ..core.inventory import Inventory
from ..core.journal import Entry, Journal, default_journal_path
from ..core.plan import Plan, PlanOptions, make_plan
from .messages import InventoryChanged, JournalAdded, to_message

Post = Callable[[Message], Any]
POLL_INTERVAL = 30.0  # seconds between inventory rounds; a round starts only after the last one ended


@dataclass
class OpPreview:
    """What a dangerous operation will do, for its confirmation: which containers stop and start where."""

    title: str
    stops: list[tuple[str, str]] = field(default_factory=list)  # (node, container)
    starts: list[tuple[str, str]] = field(default_factory=list)  # (node, what starts there)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"stop  {c} on {n}" for n, c in self.stops]
        out += [f"start {w} on {n}" for n, w in self.starts]
        return out + self.notes


def pivot_target(engine: str, mode: str) -> tuple[str, str]:
    """Where a pivot goes: off SGLang to vLLM with Ray (the documented way out of SGLang's
    cross-node hang), and from vLLM back to SGLang."""
    return ("vllm", "ray") if engine == "sglang" else ("sglang", "native")


class Controller:
    """Real core: SSH to the configured nodes, inventory polls, deployer and transfers."""

    def __init__(self, config: Config, *, journal: Journal | None = None, cluster: Any = None,
                 deployer_factory: Callable[..., Any] | None = None, poll_interval: float = POLL_INTERVAL,
                 transfer_opts: Any = None) -> None:
        self.config = config
        self.journal = journal if journal is not None else Journal(default_journal_path())
        self.bus = EventBus()
        self.cluster = cluster
        self.poll_interval = poll_interval
        self.transfer_opts = transfer_opts
        self._deployer_factory = deployer_factory
        self.deployer: Any = None
        self.inventory: Inventory | None = None
        self.plan: Plan | None = None  # the last plan launched in this session
        self.options: PlanOptions | None = None  # and the options it came from
        self._post: Post = lambda m: None
        self._unsubscribe: Callable[[], None] | None = None
        self._poller: asyncio.Task | None = None

    # -- wiring -----------------------------------------------------------------------------
    def attach(self, post: Post) -> None:
        """Start forwarding core events and journal entries to `post`."""
        self._post = post
        self._unsubscribe = self.bus.subscribe(self._forward)
        self.journal.listeners.append(self._journaled)

    def _forward(self, event: Any) -> None:
        msg = to_message(event)
        if msg is not None:
            self._post(msg)

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

    async def start(self) -> None:
        """Connect to every node, take the first inventory, pick up a running deployment, then poll."""
        from ..core.ssh import Cluster

        if self.cluster is None:
            self.cluster = Cluster(self.config, self.journal, on_change=self._link)
        await self.cluster.connect_all()
        for node in self.cluster:
            self._link(node)
        inv = await self.refresh()
        if any(c.labels.get("sparktui.deployment") for f in inv.facts.values() for c in f.containers):
            with contextlib.suppress(Exception):  # nothing to follow is not an error at start-up
                await self._get_deployer().reattach()
        self._poller = asyncio.ensure_future(self._poll())

    async def refresh(self) -> Inventory:
        from ..core.inventory import take_inventory

        inv = await take_inventory(self.cluster, self.config)
        self.inventory = inv
        for f in inv.facts.values():
            self.bus.emit(NodeUpdated(f))
        self._post(InventoryChanged(inv))
        return inv

    async def _poll(self) -> None:
        # Re-armed only after a round ends, so a slow node never piles rounds up.
        while True:
            await asyncio.sleep(self.poll_interval)
            with contextlib.suppress(Exception):
                await self.refresh()

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

    async def launch(self, plan: Plan, options: PlanOptions | None = None) -> None:
        if not plan.ok:
            raise ValueError("the plan has errors: " + "; ".join(plan.errors))
        self.plan, self.options = plan, options
        await self._get_deployer().launch(plan)

    async def stop(self) -> None:
        await self._get_deployer().stop()

    def pivot_options(self) -> PlanOptions | None:
        """The options a pivot would launch: the current ones on the other engine."""
        if self.plan is None:
            return None
        engine, mode = pivot_target(self.plan.engine, self.plan.mode)
        base = self.options or PlanOptions(tp=self.plan.tp, pp=self.plan.pp, rendezvous=self.plan.subnet)
        return replace(base, engine=engine, mode=mode, image=None, port=None)

    async def pivot(self) -> None:
        opts = self.pivot_options()
        if opts is None:
            raise RuntimeError("nothing launched in this session to pivot from")
        plan = self.make_plan(opts)
        if not plan.ok:
            raise ValueError("the pivot plan has errors: " + "; ".join(plan.errors))
        await self._get_deployer().pivot(plan)
        self.plan, self.options = plan, opts

    async def redeploy(self) -> None:
        await self._get_deployer().redeploy()

    def preview(self, op: str) -> OpPreview:
        """What stop / pivot / redeploy would stop and start, node by node."""
        plan = self.plan
        stops = [(n.name, n.container) for n in plan.nodes] if plan else []
        if op == "stop":
            return OpPreview("Stop the deployment", stops)
        if op == "redeploy":
            starts = [(n.name, f"{n.container} ({plan.engine} {n.role})") for n in plan.nodes] if plan else []
            return OpPreview("Redeploy the same plan", stops, starts)
        opts = self.pivot_options()
        if opts is None or plan is None:
            return OpPreview("Pivot", stops, notes=["nothing launched in this session"])
        target = self.make_plan(opts)
        starts = [(n.name, f"{n.container} ({target.engine} {target.mode} {n.role})") for n in target.nodes]
        notes = [f"error: {e}" for e in target.errors] + [f"warning: {w}" for w in target.warnings[:3]]
        return OpPreview(f"Pivot {plan.engine} → {target.engine} ({target.mode})", stops, starts, notes)

    # -- transfers --------------------------------------------------------------------------
    def _subnet(self) -> str | None:
        return self.plan.subnet if self.plan else None

    async def sync_model(self, dests: list[str] | None = None) -> str:
        from ..core.transfers import sync_model

        outs = await sync_model(self.cluster, self.config, dests, emit=self.bus.emit, opts=self.transfer_opts,
                                subnet=self._subnet())
        return "; ".join(f"{o.dest}: {o.message}" for o in outs) or "every node already has the model"

    async def sync_image(self, engine: str | None = None) -> str:
        from ..core.transfers import sync_image

        which = engine or (self.plan.engine if self.plan else "sglang")
        outs = await sync_image(self.cluster, self.config, which, emit=self.bus.emit, opts=self.transfer_opts,
                                subnet=self._subnet())
        return "; ".join(f"{o.dest}: {o.message}" for o in outs)

    # -- shutdown ---------------------------------------------------------------------------
    async def close(self) -> None:
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
