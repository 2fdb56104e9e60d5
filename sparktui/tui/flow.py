"""What the keys for launch, pivot, redeploy, stop, sync and drop caches do: the core's operations, as on the
command line.

prepare (fresh facts, model config, plan, checks) -> refused, or the preflight as rows in the launch
pane -> a confirmation naming what stops and starts where ("launch anyway" after a failed check) -> run.
Each step runs in a Textual worker. The flow is an object the app holds, given what it uses: the
controller (the core's operations), the config, and the screen (`FlowUi`, which the app is).
"""

from __future__ import annotations

import copy
from typing import Any, Awaitable, Protocol

from ..core.deploy.lock import LockHeld
from ..core.deploy.operations import Choices, Preview
from ..core.engines import DEFAULT_ENGINE, ENGINES
from ..core.state.events import EndpointHealth, PreflightFinished, PreflightNode, PreflightStage, PreflightStarted
from ..core.nodes.inventory import Inventory
from ..core.memory.free import DropPreview, FreeMemory, measure, shortfalls
from ..core.plan.plan import Plan, PlanOptions, make_plan
from ..core.state.states import CheckKind, Op, State
from . import actions
from . import messages as M
from .forms.launch_form import LaunchForm, Result
from .panes.launch import LaunchPane
from .routing import handles
from .screens.confirm import ConfirmScreen


class FlowUi(Protocol):
    """What the flow needs of the screen: the last inventory, the plan last run, the launch pane, dialogs,
    toasts and workers."""

    inventory: Inventory
    model_config: dict | None
    last_subnet: str | None
    plan: Plan | None
    screen_stack: list

    @property
    def launch_pane(self) -> LaunchPane: ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...

    def clear_notifications(self) -> None: ...

    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...

    async def push_screen_wait(self, screen: Any) -> Any: ...

    def post_message(self, message: Any) -> bool: ...

    def show_pane(self, pane: str) -> None: ...

    def run_op(self, name: Op | str, work: Awaitable[Any], group: str | None = None) -> None: ...

    def new_start(self) -> None: ...


class OperationsFlow:
    def __init__(self, controller: Any, config: Any, ui: FlowUi) -> None:
        self.controller = controller
        self.config = config
        self.ui = ui
        self.memory_short: list[FreeMemory] = []  # the last preflight's nodes short of free memory

    # A launch, pivot or redeploy goes through the core's operations, as on the command line:
    # prepare (fresh facts, model config, plan, checks) -> refuse or preflight -> confirm -> run.
    def make_plan(self, opts: PlanOptions) -> Plan:
        """The form's live preview: the same planner on the facts the last inventory message carried."""
        ui = self.ui
        o = copy.copy(opts)
        o.model_config = ui.model_config
        return make_plan(
            self.config,
            ui.inventory.facts,
            ui.inventory.subnets,
            o,
            last_subnet=None if o.rendezvous else ui.last_subnet,
        )

    def launch(self) -> None:
        ui = self.ui
        engine = ui.plan.engine if ui.plan is not None and ui.plan.engine in ENGINES else DEFAULT_ENGINE
        form = LaunchForm(
            self.config, ui.inventory, self.make_plan, engine=engine, check=self.check_form, drop=self.drop_from_form
        )
        ui.push_screen(form, callback=self._launch_chosen)

    def _launch_chosen(self, result: Result | None) -> None:
        if result is None:
            return
        _plan, options = result
        self.operate(Op.LAUNCH, Choices(options=options))

    def check_form(self, options: PlanOptions) -> None:
        """The form's Check button: the preflight on the form's current choices, nothing launched."""

        async def check() -> str:
            prepared = await self.controller.prepare(Op.LAUNCH, Choices(options=options))
            if not prepared.ok:
                raise RuntimeError("; ".join(prepared.errors))
            verdict = await self.controller.preflight(prepared)
            return verdict.summary().splitlines()[0]

        self.ui.run_op(Op.CHECK, check())

    def operate(self, op: Op, choices: Choices | None = None) -> None:
        self.ui.run_op(op.preparing, self._flow(op, choices or Choices()))

    async def _flow(self, op: Op, choices: Choices) -> str:
        prepared = await self.controller.prepare(op, choices)
        if not prepared.ok:
            self.ui.post_message(M.Refused(prepared))
            return ""
        force = False
        if prepared.needs_preflight:
            self.ui.post_message(M.PreflightAsked(prepared))
            verdict = await self.controller.preflight(prepared)
            if not verdict.ok:
                likely = (
                    "the engine will most likely refuse to start for want of free memory"
                    if verdict.root.kind == CheckKind.MEMORY
                    else "the engines will most likely hang at their rendezvous"
                )
                anyway = Preview(
                    f"The preflight failed: {prepared.op.value} anyway",
                    prepared.preview.stops,
                    prepared.preview.starts,
                    [f"why: {verdict.reason}", f"fix: {verdict.fix}", likely],
                )
                drop = verdict.droppable
                answer = await self._confirmed(
                    anyway,
                    f"{prepared.op.value.capitalize()} anyway",
                    alt=(f"Drop caches on {drop[0]}" if len(drop) == 1 else f"Drop caches on {len(drop)} nodes")
                    if drop
                    else None,
                )
                if answer == "alt":  # drop the page cache, then check (and offer the operation) again
                    known = {m.node: m for m in verdict.memory_short}
                    self.ui.run_op(Op.DROP_CACHES, self._drop_flow(drop, known, again=(op, choices)))
                    return ""
                if not answer:
                    return f"not started: {verdict.reason}"
                force = True
            await self._offer_stale(op, verdict)
        if op is not Op.LAUNCH or prepared.replaces:
            verbs = {Op.STOP: "Stop", Op.PIVOT: "Pivot", Op.REDEPLOY: "Redeploy", Op.LAUNCH: "Replace"}
            if not force and not await self._confirmed(prepared.preview, verbs[op]):
                return ""
        self.ui.post_message(M.Confirmed(prepared))
        # The deploy group is exclusive: a stop or pivot cancels a launch still on its way.
        self.ui.run_op(op, self._run_locked(prepared, force), group="deploy")
        return ""

    async def _offer_stale(self, op: Op, verdict: Any) -> None:
        """The preflight named containers earlier launches left stopped: remove them if the user agrees
        (as the CLI's prompt or --yes); the operation goes on either way."""
        stale = getattr(verdict, "stale", None) or {}
        if not stale:
            return
        ask = Preview(
            "Remove the stale containers earlier launches left",
            [(n, f"{c} (stopped)") for n, names in stale.items() for c in names],
            [],
            [
                "no process of theirs runs: removing them frees their names and their disk",
                f"the {op.value} goes on either way",
            ],
        )
        if not await self._confirmed(ask, "Remove them"):
            return
        for r in await self.controller.remove_stale(stale):
            what = ", ".join(r["removed"]) or "nothing"
            self.ui.notify(
                f"{r['node']}: removed {what}" + (f" ({r['error']})" if r["error"] else ""),
                severity="error" if r["error"] else "information",
            )

    async def _run_locked(self, prepared: Any, force: bool) -> str:
        """Run under the deployment's lock; when another sparktui holds it, show who, and break it only
        when told to (the same choice as the CLI's --break-lock)."""
        try:
            return await self.controller.run(prepared, force=force)
        except LockHeld as e:
            busy = Preview(
                f"{prepared.deployment} is busy: another sparktui holds its lock",
                [],
                [],
                [f"held by: {e.holder.words()}", f"lock: {e.where}", "break it only if that process is gone or stuck"],
            )
            if not await self._confirmed(busy, "Break the lock"):
                return f"not started: {e.holder.words()} holds the lock"
            return await self.controller.run(prepared, force=force, breaking=e.holder)

    async def _confirmed(self, preview: Any, verb: str, alt: str | None = None) -> bool | str:
        """True, False, or "alt" when the third button (alt) was offered and chosen."""
        self.ui.clear_notifications()  # toasts sit above dialogs; the one being answered has done its job
        answer = await self.ui.push_screen_wait(ConfirmScreen(preview, verb, alt))
        return answer if answer == "alt" and alt else bool(answer is True)

    # -- drop caches: free the page cache a copy left, when the engine would otherwise lack memory ----
    def drop_caches(self) -> None:
        names, known = self._drop_targets()
        self.ui.run_op(Op.DROP_CACHES, self._drop_flow(names, known))

    def drop_from_form(self, names: list[str], known: dict[str, FreeMemory]) -> None:
        """The form's Drop caches button (its plan check found the shortfall)."""
        self.ui.run_op(Op.DROP_CACHES, self._drop_flow(names, known))

    def _judging_plan(self) -> Plan | None:
        """The plan whose fraction free memory is judged by: the launched one, else the defaults'."""
        try:
            plan = self.ui.plan if self.ui.plan is not None else self.make_plan(PlanOptions())
        except Exception:  # noqa: BLE001 - no plan to judge by: no shortfall known
            return None
        return plan if plan.mem_fraction is not None else None

    def plan_shortfalls(self) -> list[FreeMemory]:
        """The plan checks' free-memory shortfalls on the freshest facts."""
        plan = self._judging_plan()
        return shortfalls(self.ui.inventory.facts, [n.name for n in plan.nodes], plan.mem_fraction) if plan else []

    def _judge_after(self, results: list, known: dict[str, FreeMemory]) -> list[FreeMemory]:
        """The plan check again, on the memory each node reported right after its drop (nodes on
        unified memory only: a discrete GPU does not allocate from it)."""
        plan = self._judging_plan()
        out = []
        for r in results:
            fraction = (
                known[r.node].fraction
                if r.node in known
                else (plan.mem_fraction if plan is not None and r.node in plan.unified else None)
            )
            m = measure(r.node, r.after, fraction) if r.ok else None
            if m is not None:
                out.append(m)
        return out

    def _drop_targets(self) -> tuple[list[str], dict[str, FreeMemory]]:
        """The nodes a drop would help (the last preflight's, else the plan checks'), else every node."""
        found = [m for m in self.memory_short if m.droppable] or [m for m in self.plan_shortfalls() if m.droppable]
        if found:
            return [m.node for m in found], {m.node: m for m in found}
        return [n.name for n in self.config.nodes], {}

    async def _drop_flow(
        self, names: list[str], known: dict[str, FreeMemory], again: tuple[Op, Choices] | None = None
    ) -> str:
        """Confirm (the CLI's text), drop through the core, say before and after, then check again:
        the refused operation's whole check when it came from one, else the plan checks."""
        if not await self._confirmed(DropPreview(names, known), "Drop"):
            return ""
        results = await self.controller.drop_caches(names)
        self.memory_short = [m for m in self.memory_short if m.node not in names]
        lines = [r.summary() for r in results]
        ok = all(r.ok for r in results)
        if ok and again is not None:
            self.ui.notify("\n".join(lines + ["checking again…"]), title="Drop caches", markup=False)
            self.operate(*again)
            return ""
        judged = self._judge_after(results, known)
        still = [m for m in judged if m.short]
        lines += [f"still short: {m.message()}" for m in still] or (
            ["free memory ok on " + ", ".join(m.node for m in judged)] if judged else []
        )
        self.ui.notify(
            "\n".join(lines),
            title="Drop caches",
            severity="information" if ok and not still else "warning",
            timeout=30,
            markup=False,
        )
        return ""

    # -- what the flow's own messages say (posted from its workers, handled in order on the screen) --
    def refused(self, p: Any) -> None:
        self.ui.launch_pane.set_state(State.REFUSED, p.errors[0])
        self.ui.notify("\n".join(p.errors), title=f"{p.op.value} refused", severity="error", timeout=30, markup=False)

    def preflight_asked(self, p: Any) -> None:
        self.ui.new_start()
        self.ui.launch_pane.set_state(
            State.PREFLIGHT, f"checking the rendezvous at {p.plan.head_ip} on {p.plan.subnet}"
        )

    def confirmed(self, p: Any) -> None:
        if p.plan is not None:
            self.ui.plan = p.plan
            self.ui.nodes_pane.set_paths(p.plan.fabric.get("paths"))
            if not p.needs_preflight:
                self.ui.new_start()
            self.ui.launch_pane.set_plan(p.plan)
            self.ui.launch_pane.set_state(
                State.STARTING, f"{p.plan.engine} {p.plan.mode} TP {p.plan.tp} × PP {p.plan.pp} over {p.plan.subnet}"
            )

    def pivot(self) -> None:
        self.operate(Op.PIVOT)

    def redeploy(self) -> None:
        self.operate(Op.REDEPLOY)

    def stop(self) -> None:
        self.operate(Op.STOP)

    def _sync(self, op: Op, choices: Choices) -> None:
        async def sync() -> str:
            prepared = await self.controller.prepare(op, choices)
            if prepared.futile:  # an image cannot load the model: said, and asked, before anything is copied
                ask = Preview(
                    "An engine image cannot load this model: copy it anyway", notes=prepared.futile + prepared.warnings
                )
                if not await self._confirmed(ask, "Copy anyway"):
                    return "not copied"
            return await self.controller.run(prepared)

        self.ui.show_pane("pane-transfers")
        self.ui.run_op(op, sync())

    def sync_model(self) -> None:
        self._sync(Op.SYNC_MODEL, Choices())

    def sync_image(self) -> None:
        plan = self.ui.plan
        self._sync(Op.SYNC_IMAGE, Choices(engine_or_image=plan.engine if plan else DEFAULT_ENGINE))

    # -- core events (the launch pane draws the rows first; routing.py) ---------------------------
    @handles(PreflightStarted, PreflightNode, PreflightStage)
    def _preflight_progress(self, _e: Any) -> None:
        self._forward_check()

    @handles(PreflightFinished)
    def _preflight_finished(self, e: PreflightFinished) -> None:
        v = e.verdict
        self._forward_check()
        self.memory_short = list(v.memory_short) if v is not None else []
        if v is not None and not v.ok:
            self.ui.launch_pane.set_state(State.REFUSED, f"preflight: {v.reason}")
            offer = ""
            if v.droppable:
                key = actions.display_keys(actions.keys_for("drop_caches", self.config.keymap))
                offer = f"\npress {key} to drop the page cache on {', '.join(v.droppable)}"
            self.ui.notify(
                f"{v.reason}\nfix: {v.fix}{offer}", title="Preflight failed", severity="error", timeout=30, markup=False
            )

    def _forward_check(self) -> None:
        content = self.ui.launch_pane.preflight_content()
        for screen in self.ui.screen_stack:
            if isinstance(screen, LaunchForm) and content is not None:
                screen.show_check(content)

    @handles(EndpointHealth)
    def _health(self, e: EndpointHealth) -> None:
        if e.ok:  # the state change tells the loss; the recovery deserves its own word
            self.ui.notify(f"{e.endpoint} answers again", title="Endpoint", markup=False)
