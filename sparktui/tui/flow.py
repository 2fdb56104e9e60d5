"""What the keys for launch, pivot, redeploy, stop and sync do: the core's operations, as on the command line.

prepare (fresh facts, model config, plan, checks) -> refused, or the preflight as rows in the launch
pane -> a confirmation naming what stops and starts where ("launch anyway" after a failed check) -> run.
Each step runs in a Textual worker; what the core says arrives as messages handled here.
"""
from __future__ import annotations

import copy
from typing import Any

from ..core.deploy.operations import Choices, Op, Preview
from ..core.plan import Plan, PlanOptions, make_plan
from . import messages as M
from .forms.launch_form import LaunchForm, Result
from .screens.confirm import ConfirmScreen


class OperationsFlow:
    """Mixed into the app (which provides controller, config, the panes, _run_op and the UiState)."""

    controller: Any
    config: Any
    plan: Plan | None

    # A launch, pivot or redeploy goes through the core's operations, as on the command line:
    # prepare (fresh facts, model config, plan, checks) -> refuse or preflight -> confirm -> run.
    def make_plan(self, opts: PlanOptions) -> Plan:
        """The form's live preview: the same planner on the facts the last inventory message carried."""
        o = copy.copy(opts)
        o.model_config = self.model_config
        return make_plan(self.config, self.facts, self.subnets, o,
                         last_subnet=None if o.rendezvous else self.last_subnet)

    def action_launch(self) -> None:
        engine = "vllm" if self.plan is not None and self.plan.engine == "vllm" else "sglang"
        form = LaunchForm(self.config, self.facts, self.subnets, self.make_plan, engine=engine, check=self.check_form)
        self.push_screen(form, callback=self._launch_chosen)

    def _launch_chosen(self, result: Result | None) -> None:
        if result is None:
            return
        _plan, options = result
        self._operate(Op.LAUNCH, Choices(options=options))

    def check_form(self, options: PlanOptions) -> None:
        """The form's Check button: the preflight on the form's current choices, nothing launched."""

        async def check() -> str:
            prepared = await self.controller.prepare(Op.LAUNCH, Choices(options=options))
            if not prepared.ok:
                raise RuntimeError("; ".join(prepared.errors))
            verdict = await self.controller.preflight(prepared)
            return verdict.summary().splitlines()[0]

        self._run_op("check", check())

    def _operate(self, op: Op, choices: Choices | None = None) -> None:
        self._run_op(f"prepare_{op.value}", self._flow(op, choices or Choices()))

    async def _flow(self, op: Op, choices: Choices) -> str:
        prepared = await self.controller.prepare(op, choices)
        if not prepared.ok:
            self.post_message(M.Refused(prepared))
            return ""
        force = False
        if prepared.needs_preflight:
            self.post_message(M.PreflightAsked(prepared))
            verdict = await self.controller.preflight(prepared)
            if not verdict.ok:
                anyway = Preview(f"The preflight failed: {prepared.op.value} anyway", prepared.preview.stops,
                                 prepared.preview.starts,
                                 [f"why: {verdict.reason}", f"fix: {verdict.fix}",
                                  "the engines will most likely hang at their rendezvous"])
                if not await self._confirmed(anyway, f"{prepared.op.value.capitalize()} anyway"):
                    return f"not started: {verdict.reason}"
                force = True
        if op is not Op.LAUNCH or prepared.replaces:
            verbs = {Op.STOP: "Stop", Op.PIVOT: "Pivot", Op.REDEPLOY: "Redeploy", Op.LAUNCH: "Replace"}
            if not force and not await self._confirmed(prepared.preview, verbs[op]):
                return ""
        self.post_message(M.Confirmed(prepared))
        # The deploy group is exclusive: a stop or pivot cancels a launch still on its way.
        self._run_op(op.value, self.controller.run(prepared, force=force), group="deploy")
        return ""

    async def _confirmed(self, preview: Preview, verb: str) -> bool:
        self.clear_notifications()  # toasts sit above dialogs; the one being answered has done its job
        return bool(await self.push_screen_wait(ConfirmScreen(preview, verb)))

    def on_refused(self, msg: M.Refused) -> None:
        p = msg.prepared
        self.launch_pane.set_state("refused", p.errors[0])
        self.notify("\n".join(p.errors), title=f"{p.op.value} refused", severity="error", timeout=30, markup=False)

    def on_preflight_asked(self, msg: M.PreflightAsked) -> None:
        self._new_start()
        plan = msg.prepared.plan
        self.launch_pane.set_state("preflight", f"checking the rendezvous at {plan.head_ip} on {plan.subnet}")

    def on_confirmed(self, msg: M.Confirmed) -> None:
        p = msg.prepared
        if p.plan is not None:
            self.plan = p.plan
            if not p.needs_preflight:
                self._new_start()
            self.launch_pane.set_state("starting", f"{p.plan.engine} {p.plan.mode} TP {p.plan.tp} × PP {p.plan.pp} "
                                                   f"over {p.plan.subnet}")

    def _new_start(self) -> None:
        """A launch, pivot or redeploy begins: the timeline, problems and hang notice start over."""
        self.has_plan = True
        self._hang_told = False
        self.launch_pane.reset()
        self.show_pane("pane-launch")

    def action_pivot(self) -> None:
        self._operate(Op.PIVOT)

    def action_redeploy(self) -> None:
        self._operate(Op.REDEPLOY)

    def action_stop(self) -> None:
        self._operate(Op.STOP)

    def _sync(self, op: Op, choices: Choices) -> None:
        async def sync() -> str:
            return await self.controller.run(await self.controller.prepare(op, choices))

        self.show_pane("pane-transfers")
        self._run_op(op.value, sync())

    def action_sync_model(self) -> None:
        self._sync(Op.SYNC_MODEL, Choices())

    def action_sync_image(self) -> None:
        self._sync(Op.SYNC_IMAGE, Choices(engine_or_image=self.plan.engine if self.plan else "sglang"))

    def on_preflight_began(self, msg: M.PreflightBegan) -> None:
        e = msg.event
        self.launch_pane.preflight_begin(e.nodes, f"{e.addr} on {e.subnet} in {e.image}")
        self._forward_check()

    def on_preflight_row(self, msg: M.PreflightRow) -> None:
        self.launch_pane.preflight_row(msg.event.result)
        self._forward_check()

    def on_preflight_done(self, msg: M.PreflightDone) -> None:
        v = msg.event.verdict
        self.launch_pane.preflight_done(v, None if v is not None else msg.event.summary)
        self._forward_check()
        if v is not None and not v.ok:
            self.launch_pane.set_state("refused", f"preflight: {v.reason}")
            self.notify(f"{v.reason}\nfix: {v.fix}", title="Preflight failed", severity="error", timeout=30,
                        markup=False)

    def _forward_check(self) -> None:
        content = self.launch_pane.preflight_content()
        for screen in self.screen_stack:
            if isinstance(screen, LaunchForm) and content is not None:
                screen.show_check(content)

    def on_health_changed(self, msg: M.HealthChanged) -> None:
        e = msg.event
        if e.ok:  # the state change tells the loss; the recovery deserves its own word
            self.notify(f"{e.endpoint} answers again", title="Endpoint", markup=False)

