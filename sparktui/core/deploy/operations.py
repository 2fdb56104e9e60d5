"""Every deploy operation, prepared as one object and then run: the TUI and the CLI call only this.

prepare(op, choices) takes fresh facts, reads the model's config.json from the node holding it,
plans, checks (plan errors, unreachable nodes, ports held on the nodes, what already runs), and
says what stops and starts where. preflight(prepared) runs the rendezvous check and reports each
node as an event. run(prepared) does it. Nothing here asks the user: each front asks in its own way
with the same Preview, so both fronts plan, check and refuse alike for the same choices.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field
from typing import Any, Callable

from ..state import labels as L
from ..config.config import Config
from ..engines import DEFAULT_ENGINE
from ..state.events import EventBus, PreflightFinished, PreflightNode, PreflightStage, PreflightStarted
from ..nodes import facts_store
from ..nodes import inventory as _inventory
from ..plan import modelconfig
from ..plan.image import inspect_for_plan
from ..nodes.inventory import Inventory
from ..plan.plan import Plan, PlanOptions, make_plan
from ..network.ports import Holder, port_conflicts, ports_of
from ..remote.ssh import Cluster
from ..state.statefile import parse_json
from ..state.states import Op
from .containers import Found
from .orchestrator import READY_TIMEOUT_S, DeployError, Deployer
from ..state.deployment import Deployment
from .record import read_command, record_path
from . import lock as _lock

LOCKED_OPS = (Op.LAUNCH, Op.PIVOT, Op.REDEPLOY, Op.STOP)  # what changes a deployment's containers

PREFLIGHT_TIMEOUT = 30.0


@dataclass
class Choices:
    """What the user picked; None is the default (the config's, or the running deployment's)."""

    options: PlanOptions | None = None  # launch: the plan options (form fields or command-line flags)
    to: str | None = None  # pivot: the engine to switch to (default: the next of the pivot cycle, engines.next_engine)
    deployment: str | None = None  # stop / pivot / redeploy: which deployment (default: the cluster name)
    dests: list[str] | None = None  # sync model: the nodes to copy to (default: all that lack it)
    engine_or_image: str | None = None  # sync image
    notes: list[str] = field(default_factory=list)  # said with the plan's warnings (a recipe's notes)


@dataclass
class Preview:
    """What an operation will do, node by node: which containers stop there and what starts there."""

    title: str
    stops: list[tuple[str, str]] = field(default_factory=list)  # (node, container and its state)
    starts: list[tuple[str, str]] = field(default_factory=list)  # (node, what starts there)
    notes: list[str] = field(default_factory=list)

    def lines(self, notes: bool = True) -> list[str]:
        """The one formatting of "what stops and starts where", for every confirmation."""
        nodes = list(dict.fromkeys([n for n, _ in self.stops] + [n for n, _ in self.starts]))
        out = []
        for node in nodes:
            out.append(f"{node}:")
            out += [f"  stop  {c}" for n, c in self.stops if n == node]
            out += [f"  start {w}" for n, w in self.starts if n == node]
        return out + (self.notes if notes else [])

    def text(self, notes: bool = True) -> str:
        return "\n".join([self.title + ":"] + ["  " + ln for ln in self.lines(notes)])

    def to_json(self) -> dict:
        return {
            "title": self.title,
            "stops": [{"node": n, "container": c} for n, c in self.stops],
            "starts": [{"node": n, "what": w} for n, w in self.starts],
            "notes": list(self.notes),
        }


def starts_of(plan: Plan) -> list[tuple[str, str]]:
    return [
        (n.name, f"{n.container} ({plan.engine} {plan.mode} {n.role}, rank {n.rank}, {plan.image})") for n in plan.nodes
    ]


def stops_of(found: dict[str, Found]) -> list[tuple[str, str]]:
    out = []
    for f in found.values():
        if f.error:
            out.append((f.node, f"? (cannot ask: {f.error})"))
        out += [(f.node, f"{c.name} ({L.engine_of(c.labels)}, {c.state})") for c in f.containers]
    return out


@dataclass
class Prepared:
    """An operation planned and checked, not yet run: running it runs exactly this plan."""

    op: Op
    deployment: str
    choices: Choices
    preview: Preview
    inventory: Inventory | None = None
    model_config: dict | None = None
    options: PlanOptions | None = None
    plan: Plan | None = None
    found: dict[str, Found] = field(default_factory=dict)  # this deployment's containers now
    conflicts: list[Holder] = field(default_factory=list)  # ports the plan needs, held on a node
    errors: list[str] = field(default_factory=list)  # why it must not run (plan errors included)
    warnings: list[str] = field(default_factory=list)
    # why running it would be for nothing (a copy of a model that a configured image cannot load): fronts ask first
    futile: list[str] = field(default_factory=list)
    resuming: bool = False  # this very plan already runs: nothing starts twice
    replaces: bool = False  # something of this deployment runs and will be stopped first
    verdict: Any = None  # the preflight's Verdict once it ran

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def needs_preflight(self) -> bool:
        return self.op.starts_engine and self.plan is not None and not self.resuming

    def checks(self) -> dict:
        """The checks as data: what the TUI shows and the CLI prints, equal for equal choices."""
        return {
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "ports": [h.to_json() for h in self.conflicts],
        }

    def to_json(self) -> dict:
        return {
            "op": self.op.value,
            "deployment": self.deployment,
            "plan_id": self.plan.plan_id if self.plan else None,
            "resuming": self.resuming,
            "replaces": self.replaces,
            "preview": self.preview.to_json(),
            **self.checks(),
        }


async def model_config_of(cluster: Cluster, config: Config, path: str) -> dict | None:
    """The model's config.json from the node holding it first (None when absent); ModelConfigError when
    it cannot be used (too large, not JSON, a field out of range).

    The TP checks read its head counts and trust_remote_code comes from its auto_map, so every front
    plans with it; a checkpoint without one is not an error worth a failed command in the journal.
    """
    node = cluster.nodes.get(config.model.source or config.head.name)
    if node is None:
        return None
    return await modelconfig.fetch(node, path)


class Operations:
    """prepare / preflight / run for one cluster; the deployer it drives keeps watching after a run."""

    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        bus: EventBus,
        *,
        deployer: Any = None,
        deployer_factory: Callable[..., Any] | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
        transfer_opts: Any = None,
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.bus = bus
        self.ready_timeout = ready_timeout
        self.transfer_opts = transfer_opts
        self._factory = deployer_factory
        self._deployer = deployer
        self.inventory: Inventory | None = None  # the freshest one taken here
        self.model_config: dict | None = None  # the model's config.json, as last read
        self._last: dict[str, str | None] = {}  # deployment -> the subnet of its last launch
        self._locks: dict[str, _lock.Holder] = {}  # deployment -> this process's hold of its lock
        self.lock_notes: list[str] = []  # what taking a lock said (a dead holder's lock taken over)

    # -- parts ------------------------------------------------------------------------------------
    def deployer(self, name: str | None = None) -> Any:
        """The deployer (one per Operations); `name` selects the deployment it acts on."""
        if self._deployer is None:
            if self._factory is not None:
                self._deployer = self._factory(self.cluster, self.config, self.bus)
            else:
                self._deployer = Deployer(
                    self.cluster, self.config, self.bus, planner=self._fresh_plan, ready_timeout=self.ready_timeout
                )
        if name:
            from ..engines.common import safe_name

            if self._deployer.name != safe_name(name):
                self._deployer.name = safe_name(name)
        return self._deployer

    async def take_inventory(self) -> Inventory:
        self.inventory = await _inventory.take_inventory(self.cluster, self.config)
        return self.inventory

    async def _read_model_config(self, opts: PlanOptions) -> dict | None:
        try:
            cfg = await model_config_of(self.cluster, self.config, opts.model_path or self.config.model.path)
        except modelconfig.ModelConfigError as e:  # planned without it; the plan says why
            opts.model_config_problem = str(e)
            return None
        if cfg is not None:
            self.model_config = cfg
        return cfg

    async def last_subnet(self, deployment: str | None = None) -> str | None:
        """The subnet the deployment's last launch used (its record on the head), if any; read once."""
        from ..engines.common import safe_name

        name = safe_name(deployment or self.config.cluster)
        if name not in self._last:
            path = record_path(name)
            try:  # no record is the common case: not an error in the journal
                r = await self.cluster[self.config.head.name].run(
                    f"if [ -f {path} ]; then {read_command(path)}; fi", timeout=30
                )
                rec = Deployment.from_json(parse_json(r.stdout, path), path) if r.ok and r.stdout.strip() else None
            except Exception:  # noqa: BLE001 - unreadable: the plan works without it
                return None
            self._last[name] = rec.subnet if rec is not None else None
        return self._last[name]

    async def plan(self, opts: PlanOptions, last_subnet: str | None = None) -> Plan:
        """Fresh facts and the model's config, then the plan: what every front shows and runs."""
        opts = copy.deepcopy(opts)
        inv = await self.take_inventory()
        await inspect_for_plan(self.cluster, self.config, inv.facts, opts)  # the engine release in the image
        # kept again with what the image holds, so an offline plan names the same engine release
        facts_store.remember(self.config.cluster, {n.name: n.host for n in self.config.nodes}, inv.facts)
        if opts.model_config is None:
            opts.model_config = await self._read_model_config(opts)
        image = opts.image or self.config.image_for(opts.engine)
        if getattr(opts.support, "image", None) != image or getattr(opts.support, "engine", None) != opts.engine:
            opts.support = await self.support(opts, inv)  # asked of the image before anything starts
        return make_plan(self.config, inv.facts, inv.subnets, opts, last_subnet=last_subnet)

    async def support(self, opts: PlanOptions, inv: Inventory | None = None):
        """The support check (core/plan/support.py) for the image these options would run, on their head."""
        from ..plan.support import support_for

        head = (opts.nodes or [self.config.head.name])[0]
        f = (inv or self.inventory).facts.get(head) if (inv or self.inventory) else None
        if f is None or not f.reachable:
            return None
        return await support_for(self.cluster, self.config, opts.engine, opts.image, opts.model_path, head=head)

    async def _fresh_plan(self, opts: PlanOptions) -> Plan:
        return await self.plan(opts)

    # -- the deployment's lock ----------------------------------------------------------------------
    async def lock(
        self, op: Op | str, deployment: str | None = None, *, breaking: _lock.Holder | None = None
    ) -> _lock.Holder:
        """Take the deployment's lock on the head for `op` (kept until unlock or close); LockHeld names
        the holder. A holder whose process is gone from this very host is taken over, with a note."""
        from ..engines.common import safe_name

        name = safe_name(deployment or self.config.cluster)
        if name in self._locks:
            return self._locks[name]
        head = self.cluster[self.config.head.name]
        try:
            held = await _lock.take(head, name, Op(op).value, breaking=breaking)
        except _lock.LockHeld as e:
            if breaking is not None or not e.holder.gone():
                raise
            held = await _lock.take(head, name, Op(op).value, breaking=e.holder)
            self.lock_notes.append(
                f"took over the lock of {name}: its holder ({e.holder.words()}) no longer runs on this host"
            )
        self._locks[name] = held
        return held

    async def unlock(self, deployment: str | None = None) -> None:
        from ..engines.common import safe_name

        held = self._locks.pop(safe_name(deployment or self.config.cluster), None)
        if held is not None:
            await _lock.release(self.cluster[self.config.head.name], safe_name(deployment or self.config.cluster), held)

    # -- prepare ------------------------------------------------------------------------------------
    async def prepare(self, op: Op | str, choices: Choices | None = None) -> Prepared:
        op = Op(op)
        ch = choices or Choices()
        if op is Op.LAUNCH:
            return await self._prepare_launch(ch)
        if op in (Op.PIVOT, Op.REDEPLOY):
            return await self._prepare_switch(op, ch)
        if op is Op.STOP:
            d = self.deployer(ch.deployment)
            found = await d.existing()
            p = Prepared(op, d.name, ch, Preview(f"Stop deployment {d.name}", stops_of(found)), found=found)
            p.warnings = [f"{f.node}: cannot tell what runs ({f.error})" for f in found.values() if f.error]
            return p
        if op not in (Op.SYNC_MODEL, Op.SYNC_IMAGE):
            raise ValueError(f"{op.value} is not an operation to prepare")
        what = "the model" if op is Op.SYNC_MODEL else f"image {ch.engine_or_image or DEFAULT_ENGINE}"
        p = Prepared(op, self.config.cluster, ch, Preview(f"Copy {what} to the nodes"))
        if op is Op.SYNC_MODEL:  # each configured image is asked before any weights move
            from ..plan.support import before_copy, support_of_config

            p.futile, p.warnings = before_copy(await support_of_config(self.cluster, self.config))
        return p

    async def prepare_check(self, ch: Choices) -> Prepared:
        """A launch planned for its preflight only (`sparktui preflight`): fresh facts, model config, plan."""
        opts = copy.deepcopy(ch.options) if ch.options is not None else PlanOptions()
        name = opts.deployment or self.config.cluster
        plan = await self.plan(opts, last_subnet=None if opts.rendezvous else await self.last_subnet(name))
        return Prepared(
            Op.LAUNCH,
            plan.deployment,
            ch,
            Preview(f"Check {plan.deployment}", [], starts_of(plan)),
            inventory=self.inventory,
            model_config=self.model_config,
            options=opts,
            plan=plan,
            errors=list(plan.errors),
            warnings=list(ch.notes) + list(plan.warnings),
        )

    async def _prepare_launch(self, ch: Choices) -> Prepared:
        opts = copy.deepcopy(ch.options) if ch.options is not None else PlanOptions()
        d = self.deployer(opts.deployment or self.config.cluster)
        plan = await self.plan(opts, last_subnet=None if opts.rendezvous else await self.last_subnet(d.name))
        opts.model_config = None
        p = Prepared(
            Op.LAUNCH,
            plan.deployment,
            ch,
            Preview(f"Launch {plan.deployment}"),
            inventory=self.inventory,
            model_config=self.model_config,
            options=opts,
            plan=plan,
        )
        p.warnings = list(ch.notes) + list(plan.warnings)
        p.errors = list(plan.errors)
        found = await d.existing()
        p.found = found
        down = [f"{f.node}: {f.error}" for f in found.values() if f.error]
        if down:
            p.errors.append("cannot tell what already runs: " + "; ".join(down))
        ours = [c for f in found.values() for c in f.containers]
        p.resuming = bool(ours) and all(c.state == "running" and c.labels.get(L.PLAN) == plan.plan_id for c in ours)
        p.replaces = bool(ours) and not p.resuming
        if p.replaces:
            p.preview.title = f"Replace deployment {plan.deployment} (it runs another plan)"
            p.preview.stops = stops_of(found)
        if p.resuming:
            p.preview.notes.append(
                f"{plan.deployment} already runs this plan ({plan.plan_id}): resuming, nothing is started twice"
            )
        p.preview.starts = starts_of(plan)
        if not p.resuming:
            await self._check_ports(p)
        return p

    async def _prepare_switch(self, op: Op, ch: Choices) -> Prepared:
        d = self.deployer(ch.deployment)
        try:
            opts, plan = await (d.plan_pivot(ch.to) if op is Op.PIVOT else d.plan_redeploy())
        except DeployError as e:
            return Prepared(op, d.name, ch, Preview(f"{op.value.capitalize()} {d.name}"), errors=[str(e)])
        found = await d.existing()
        title = (
            f"Pivot {d.name} to {plan.engine} ({plan.mode})"
            if op is Op.PIVOT
            else f"Redeploy {d.name} ({plan.engine} {plan.mode})"
        )
        title += f", TP {plan.tp} x PP {plan.pp} on {plan.subnet}"
        carried = [w for w in plan.warnings if "carried over to" in w]  # what a pivot keeps and drops
        p = Prepared(
            op,
            d.name,
            ch,
            Preview(title, stops_of(found), starts_of(plan), carried),
            inventory=self.inventory,
            model_config=self.model_config,
            options=opts,
            plan=plan,
            found=found,
            errors=list(plan.errors),
            warnings=list(plan.warnings),
            replaces=True,
        )
        await self._check_ports(p)
        return p

    async def _check_ports(self, p: Prepared) -> None:
        """Ports the plan needs that something other than this deployment holds: refused, named."""
        if p.plan is None or not p.plan.nodes:
            return
        own = {c.id for f in p.found.values() for c in f.containers}
        try:
            p.conflicts = await port_conflicts(self.cluster, ports_of(p.plan), own)
        except Exception as e:  # noqa: BLE001 - a node lost meanwhile: say so, the launch would fail anyway
            p.warnings.append(f"ports not checked: {e}")
            return
        p.errors += [h.sentence() for h in p.conflicts]

    # -- preflight ----------------------------------------------------------------------------------
    async def preflight(
        self,
        p: Prepared,
        timeout: float = PREFLIGHT_TIMEOUT,
        mode: str = "auto",
        rails: bool = False,
        start_window: float | None = None,
    ) -> Any:
        """The rendezvous check of the prepared plan; every node's row and stage is an event as it arrives."""
        from ..preflight import DEFAULT_START_WINDOW, NodeResult, run_preflight

        plan = p.plan
        if plan is None:
            raise DeployError("nothing to check: the operation starts no engine")
        self.bus.emit(
            PreflightStarted(p.deployment, [n.name for n in plan.nodes], plan.subnet, plan.head_ip, plan.image)
        )

        def row(r: NodeResult) -> None:
            self.bus.emit(PreflightNode(p.deployment, r))

        try:
            verdict = await run_preflight(
                self.cluster,
                self.config,
                plan,
                timeout,
                subnets=self.inventory.subnets if self.inventory else None,
                mode=mode,
                on_node=row,
                rails=rails,
                start_window=start_window or DEFAULT_START_WINDOW,
                on_stage=lambda node, stage: self.bus.emit(PreflightStage(p.deployment, node, stage)),
            )
        except Exception as e:
            self.bus.emit(PreflightFinished(p.deployment, None, f"the check could not run: {e}"))
            raise
        p.verdict = verdict
        self.bus.emit(PreflightFinished(p.deployment, verdict, verdict.summary()))
        return verdict

    async def remove_stale(self, stale: dict[str, list[str]]) -> list[dict]:
        """Remove the stale containers the preflight named (node -> names), once the user agreed:
        one `docker rm` per node; what each node removed or why not."""
        import asyncio

        from .containers import remove_stale

        nodes = [n for n in stale if n in self.cluster.nodes]
        done = await asyncio.gather(*(remove_stale(self.cluster[n], stale[n]) for n in nodes))
        return [{"node": n, "removed": removed, "error": error} for n, (removed, error) in zip(nodes, done)]

    # -- run ----------------------------------------------------------------------------------------
    async def run(self, p: Prepared, *, force: bool = False, breaking: _lock.Holder | None = None) -> str:
        """Do what was prepared. Refused when its checks failed (unless force, for the preflight only).

        An operation on a deployment runs under its lock: the caller's (lock()) if it took it before
        preparing, else one taken here for the run alone. breaking: the holder shown and agreed to break.
        """
        if p.errors:
            raise DeployError("; ".join(p.errors))
        if p.op not in LOCKED_OPS or p.deployment in self._locks:
            return await self._run(p, force)
        await self.lock(p.op, p.deployment, breaking=breaking)
        try:
            return await self._run(p, force)
        finally:
            await self.unlock(p.deployment)

    async def _run(self, p: Prepared, force: bool) -> str:
        self._last.pop(p.deployment, None)  # its record changes with this run
        if p.verdict is not None and not p.verdict.ok and not force:
            raise DeployError(f"the preflight failed: {p.verdict.reason} (fix: {p.verdict.fix})")
        if p.op is Op.LAUNCH:
            assert p.plan is not None
            await self.deployer(p.deployment).launch(p.plan, p.options, if_exists="replace" if p.replaces else "ask")
            return f"launched {p.deployment}"
        if p.op in (Op.PIVOT, Op.REDEPLOY):
            assert p.plan is not None and p.options is not None
            await self.deployer(p.deployment).relaunch(p.plan, p.options)
            return f"{p.op.value}: {p.plan.engine} on {len(p.plan.nodes)} node(s)"
        if p.op is Op.STOP:
            removed = await self.deployer(p.deployment).stop()
            return f"removed {removed} container(s)"
        subnet = self._deployment_subnet()
        if p.op is Op.SYNC_MODEL:
            from ..transfers import sync_model

            outs = await sync_model(
                self.cluster, self.config, p.choices.dests, emit=self.bus.emit, opts=self.transfer_opts, subnet=subnet
            )
            return "; ".join(f"{o.dest}: {o.message}" for o in outs) or "every node already has the model"
        from ..transfers import sync_image

        image = p.choices.engine_or_image or DEFAULT_ENGINE
        outs = await sync_image(
            self.cluster, self.config, image, emit=self.bus.emit, opts=self.transfer_opts, subnet=subnet
        )
        return "; ".join(f"{o.dest}: {o.message}" for o in outs)

    def _deployment_subnet(self) -> str | None:
        d = self._deployer
        plan = getattr(d, "plan", None) if d is not None else None
        return plan.subnet if plan is not None else None

    async def close(self) -> None:
        for name in list(self._locks):  # every way out of a front ends here: no lock outlives its holder
            with contextlib.suppress(Exception):
                await self.unlock(name)
        if self._deployer is not None:
            closer = getattr(self._deployer, "close", None)
            if closer is not None:
                await closer()
