"""The Textual app: four panes, keys from the action registry, themes, notifications.

State the keys depend on lives here and is changed only by message handlers, fed by the controller:
each core event arrives as one CoreEvent and goes to the panes that own its data, then to the
operations flow and to the app's own handlers (toasts, status line); see routing.py. Core operations
run in async workers so the screen never waits on a node.
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Awaitable, Iterable

from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static, TabbedContent, TabPane, TextArea
from textual.worker import Worker, WorkerState

from ..core.config.config import Config
from ..core.state.deployment import Deployment
from ..core.diagnosis.diagnose import Milestone, Problem, ProblemCleared
from ..core.state.events import (
    ConnectionChanged,
    DeploymentChanged,
    EndpointChecked,
    LaunchStep,
    NodeUpdated,
    TransferProgress,
)
from ..core.nodes.inventory import Inventory
from ..core.plan.plan import Plan
from ..core.state.states import MilestoneKind, Op, ProblemKind, State
from ..core.state.words import milestone_words, operation_name, problem_words
from . import actions
from . import messages as M
from .controller import Controller, InventoryRound
from .flow import OperationsFlow
from .forms.launch_form import LaunchForm
from .panes.journal import JournalPane
from .panes.launch import LaunchPane
from .panes.nodes import NodesPane
from .panes.transfers import TransfersPane
from .present.deploy import endpoint_words, hang_notice, pivot_advice, sim_speed
from .present.nodes import Link
from .routing import Router, handles
from .screens.help import HelpScreen
from .theming import DEFAULT, ThemeError, discover, resolve
from .toasts import MAX_TOASTS, show
from .widgets.footer import FitFooter

PANES = ("pane-nodes", "pane-transfers", "pane-launch", "pane-journal")
# Milestones worth a notification (the timeline shows all of them).
NOTIFY_MILESTONES = (MilestoneKind.DIST_INIT_END, MilestoneKind.TRANSPORT, MilestoneKind.READY)
HISTORY_S = 120.0  # a log line this much older than the app (node clocks drift a little) is history
BRAKE = 0.1  # seconds the log readers run in step with the screen after a key press
# Below this width a toast would take half the screen: it spans the bottom instead, compact (a title
# and three lines), two at a time and for at most NARROW_TIMEOUT seconds, since the launch pane keeps
# the lasting story (state, problems, fix).
NARROW_COLS = 120
NARROW_TIMEOUT = 6.0
NARROW_KEEP = 2


_thawed = [False]  # an app of this process has unfrozen the heap (see SparkApp._settle_heap)


class SparkApp(App):
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))  # absolute: subclasses elsewhere find it too
    TITLE = "sparktui"
    BINDINGS = actions.bindings()
    NOTIFICATION_TIMEOUT = 8
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_COLS, "-wide")]  # classes on every screen (app.tcss)
    # UiState the status line and the keys follow: set from message handlers, drawn by the watchers.
    # The deployment as the core told it, one snapshot replaced (never mutated) on each change.
    deployment: reactive[Deployment] = reactive(Deployment.empty, init=False)
    running: reactive[frozenset[Op]] = reactive(frozenset(), init=False)  # operations in flight
    close_timeout = 5.0  # seconds to close the nodes' links on the way out (shorter on a signal)

    def __init__(
        self,
        config: Config,
        theme: str | None = None,
        controller: Any = None,
        *,
        max_log_lines: int = 100_000,
        autostart: bool = True,
    ) -> None:
        super().__init__()
        self.config = config
        self.controller = controller if controller is not None else Controller(config)
        self.max_log_lines = max_log_lines
        self.autostart = autostart
        self.node_names = [config.head.name] + [n.name for n in config.nodes if n.name != config.head.name]
        # UiState, read by the action registry's predicates (deployment, running: reactive)
        self.inventory_ready = False
        self._op_workers: dict[Worker, Op] = {}  # each operation's worker and the name it shows under
        self.has_plan = False
        self.links: dict[str, Link] = {}
        # What the core told in messages (never read from the controller, whose thread writes it):
        # the cluster facts as one object, replaced when news comes and handed to the launch form as is
        self.inventory = Inventory({})
        self.model_config: dict | None = None
        self.last_subnet: str | None = None
        self.plan: Plan | None = None  # the last plan this app ran
        self._hang_told = False
        self._local_for: str | None = None  # the endpoint local_endpoint forwards to
        self._opened = time.time()
        self._settled = False  # the first connect and reattach are done: what arrives now is news
        self._pending: actions.Action | None = None  # pressed before the first probe came back
        self._startup_notes: list[str] = []
        self._brake_timer = None
        self._heap_frozen = False  # gc.freeze() once the screen is built (see _settle_heap)
        self.flow = OperationsFlow(self.controller, config, self)  # what the operation keys do
        self._router: Router | None = None  # built on mount, once the panes exist
        self._setup_themes(theme)
        if config.keymap:
            unknown = sorted(set(config.keymap) - set(actions.BY_ID))
            if unknown:  # Textual would ignore them silently; a typo deserves a word
                self._startup_notes.append(
                    f"keymap: unknown binding id {', '.join(unknown)} (known: {', '.join(actions.BY_ID)})"
                )
            self.set_keymap(config.keymap)

    # -- themes -----------------------------------------------------------------------------
    def _setup_themes(self, choice: str | None) -> None:
        themes, problems = discover()
        for t in themes.values():
            self.register_theme(t)
        self._startup_notes += problems
        try:
            name, extra = resolve(choice or self.config.theme, themes)
        except ThemeError as e:
            self._startup_notes.append(str(e))
            name, extra = DEFAULT, None
        if extra is not None:
            self.register_theme(extra)
        self.theme = name if name in self.available_themes else "textual-dark"

    # -- UiState ----------------------------------------------------------------------------
    @property
    def deploy_state(self) -> State:
        return self.deployment.state

    @property
    def endpoint(self) -> str | None:  # as the nodes reach it
        return self.deployment.endpoint

    @property
    def local_endpoint(self) -> str | None:  # the same through our SSH forward
        return self.deployment.local

    @property
    def modal(self) -> bool:
        return isinstance(self.screen, ModalScreen)

    @property
    def typing(self) -> bool:
        return isinstance(self.focused, (Input, TextArea))

    @property
    def log_visible(self) -> bool:
        return self._active_pane() == "pane-launch"

    def _active_pane(self) -> str | None:
        try:
            return self.query_one("#panes", TabbedContent).active
        except Exception:  # before mount or while a modal screen is on top
            return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return actions.state_of(action, self)

    async def run_action(self, action, default_namespace=None, namespaces=None) -> bool:
        """A key, footer click or palette entry either acts or says why not; one waiting only for the
        nodes' first probe is kept and runs when the probe is in."""
        done = await super().run_action(action, default_namespace, namespaces)
        a = actions.BY_ACTION.get(action) if isinstance(action, str) else None
        if done or a is None or default_namespace not in (None, self) or self.modal:
            return done
        if a.priority and self.typing:  # the key goes on to the text field: nothing to say
            return done
        if actions.waits_for_probe(a, self):
            self._pending = a
            self.notify(f"{a.description}: waiting for the nodes' first probe; it starts then", markup=False, timeout=4)
        else:
            self.notify(
                f"{a.description}: not now, {actions.why_not(a, self)}", severity="warning", markup=False, timeout=4
            )
        return done

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="status")
        with TabbedContent(id="panes", initial="pane-nodes"):
            with TabPane("Nodes", id="pane-nodes"):
                yield NodesPane(self.config, id="nodes")
            with TabPane("Transfers", id="pane-transfers"):
                yield TransfersPane(id="transfers")
            with TabPane("Launch", id="pane-launch"):
                yield LaunchPane(
                    self.node_names,
                    max_lines=self.max_log_lines,
                    sim_speed=sim_speed(self.config.docker.env),
                    id="launch",
                )
            with TabPane("Journal", id="pane-journal"):
                yield JournalPane(id="journal")
        yield FitFooter()

    def on_mount(self) -> None:
        # the owners of each event's data first, then the flow and the app's own reactions (routing.py)
        self._router = Router(
            [
                self.query_one(NodesPane),
                self.query_one(TransfersPane),
                self.launch_pane,
                self.query_one(JournalPane),
                self.flow,
                self,
            ]
        )
        self.controller.attach(self.post_message)
        for note in self._startup_notes:
            self.notify(note, severity="warning", markup=False)
        self._draw_status()
        if self.autostart:
            self.run_worker(self._start(), group="start", name="start")
        self.call_after_refresh(self._settle_heap)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self._brake_logs()
        await super().on_event(event)

    def _brake_logs(self) -> None:
        # A key during a log flood: for a few frames' time the readers wait for the screen to take each
        # batch before reading the next, so the key's action and its frame get the interpreter lock
        # (no hook says which frame shows a key's effect, hence a timer). Nothing is dropped.
        self.controller.brake_logs(True)
        if self._brake_timer is not None:
            self._brake_timer.stop()
        self._brake_timer = self.set_timer(BRAKE, partial(self.controller.brake_logs, False))

    def _settle_heap(self) -> None:
        # What exists once the screen is built lives as long as the app: the collector's full passes
        # need not walk it again and again (during a log flood each took 40-200 ms, keys waiting).
        if _thawed[0]:  # an earlier app in this process left its objects: collect them, not freeze them
            gc.collect()
        gc.freeze()
        self._heap_frozen = True

    async def _start(self) -> None:
        try:
            await self.controller.start()
        except Exception as e:  # noqa: BLE001 - shown to the user, never a crash
            self.post_message(M.OperationFailed(Op.CONNECT, f"{type(e).__name__}: {e}"))
        finally:
            self._settled = True

    def _history(self, at: float | None) -> bool:
        """An event from before this app opened (a reattach reads the whole log): shown in the panes,
        never replayed as a toast. What a start from this app brings is news, whatever its clock says."""
        return not self._settled or (not self.has_plan and at is not None and at < self._opened - HISTORY_S)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity="information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        timeout = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        keep = MAX_TOASTS
        if self.size.width < NARROW_COLS:
            timeout, keep = min(timeout, NARROW_TIMEOUT), NARROW_KEEP
        show(self, message, title, severity, timeout, markup, keep)

    def push_screen(self, screen, *args, **kwargs):
        # A dialog, the form, the help or the palette is what the user reads now: toasts raised before
        # it would sit on top of it (the panes keep what they said).
        if isinstance(screen, ModalScreen):
            self.clear_notifications()
        return super().push_screen(screen, *args, **kwargs)

    @property
    def nodes_pane(self) -> NodesPane:
        return self.query_one(NodesPane)

    @property
    def launch_pane(self) -> LaunchPane:
        return self.query_one(LaunchPane)

    def _draw_status(self) -> None:
        from .present.deploy import STATE_STYLE
        from .present.status import status_line

        up = sum(1 for n in self.node_names if self.links.get(n, Link()).connected)
        try:
            self.query_one("#status", Static).update(
                status_line(
                    self.config.cluster,
                    up,
                    len(self.node_names),
                    self.deploy_state,
                    STATE_STYLE.get(self.deploy_state, ""),
                    self.endpoint,
                    sorted(self.running),
                    self.size.width,
                    self._local(),
                )
            )
        except NoMatches:  # a watcher before the screen is built: on_mount draws it
            pass

    def _local(self) -> str | None:
        """The SSH forward's URL, while it leads to the endpoint shown (a pivot brings another)."""
        return self.local_endpoint if self.endpoint and self._local_for == self.endpoint else None

    def on_resize(self) -> None:
        self._draw_status()

    def _state_changed(self) -> None:
        if not self.screen_stack:  # the app is closing (a worker cancelled at exit)
            return
        self._draw_status()
        self.refresh_bindings()

    watch_deployment = watch_running = _state_changed

    def show_pane(self, pane: str) -> None:
        self.query_one("#panes", TabbedContent).active = pane

    @on(TabbedContent.TabActivated, "#panes")
    def _pane_changed(self) -> None:
        if self.screen_stack:  # a tab switch still queued while the app closes
            if self._active_pane() == "pane-journal":  # its rows take the arrows and Enter at once
                self.query_one(JournalPane).focus()  # first: one footer update for both changes
            self.refresh_bindings()

    # -- operations -------------------------------------------------------------------------
    def run_op(self, name: Op | str, work: Awaitable[Any], group: str | None = None) -> None:
        # The deploy group is exclusive: a stop or pivot cancels a launch still on its way.
        worker = self.run_worker(
            work, group=group or name, exclusive=group is not None, name=name, exit_on_error=False
        )  # an adapter error is a notification, not a crash
        self._op_workers[worker] = name
        self.running = frozenset(self._op_workers.values())

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place an operation's end is handled: its result or error said, its key freed."""
        name = self._op_workers.get(event.worker)
        if name is None or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        del self._op_workers[event.worker]
        self.running = frozenset(self._op_workers.values())
        if event.state is WorkerState.ERROR:
            e = event.worker.error
            self.post_message(M.OperationFailed(name, str(e) or type(e).__name__))
        elif event.state is WorkerState.SUCCESS:
            result = event.worker.result
            self.post_message(M.OperationDone(name, result if isinstance(result, str) else ""))

    def action_refresh(self) -> None:
        self.run_op(Op.REFRESH, self.controller.refresh())

    # the operation keys: the flow (flow.py) does the work
    def action_launch(self) -> None:
        self.flow.launch()

    def action_pivot(self) -> None:
        self.flow.pivot()

    def action_redeploy(self) -> None:
        self.flow.redeploy()

    def action_stop(self) -> None:
        self.flow.stop()

    def action_sync_model(self) -> None:
        self.flow.sync_model()

    def action_sync_image(self) -> None:
        self.flow.sync_image()

    def action_drop_caches(self) -> None:
        self.flow.drop_caches()

    def new_start(self) -> None:
        """A launch, pivot or redeploy begins: the timeline, problems and hang notice start over."""
        self.has_plan = True
        self._hang_told = False
        self.launch_pane.reset()
        self.show_pane("pane-launch")

    @on(M.Refused)
    def _refused(self, msg: M.Refused) -> None:
        self.flow.refused(msg.prepared)

    @on(M.PreflightAsked)
    def _preflight_asked(self, msg: M.PreflightAsked) -> None:
        self.flow.preflight_asked(msg.prepared)

    @on(M.Confirmed)
    def _confirmed_op(self, msg: M.Confirmed) -> None:
        self.flow.confirmed(msg.prepared)

    def action_filter(self) -> None:
        self.launch_pane.open_filter()

    def action_follow(self) -> None:
        self.launch_pane.log.toggle_follow()

    def action_log_node(self) -> None:
        self.launch_pane.cycle_node(1)

    def action_log_node_back(self) -> None:
        self.launch_pane.cycle_node(-1)

    def _cycle(self, step: int) -> None:
        current = self._active_pane() or PANES[0]
        self.show_pane(PANES[(PANES.index(current) + step) % len(PANES)])

    def action_next_pane(self) -> None:
        self._cycle(1)

    def action_prev_pane(self) -> None:
        self._cycle(-1)

    def action_bench(self) -> None:
        from .screens.bench import BenchScreen

        self.push_screen(BenchScreen(self.controller))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(actions.help_rows(self, self.config.keymap)))

    async def _close_core(self) -> None:
        try:
            await asyncio.wait_for(self.controller.close(), timeout=self.close_timeout)
        except Exception:  # noqa: BLE001 - leaving must not hang on a dead link
            pass

    async def action_quit(self) -> None:
        await self._close_core()
        self.exit()

    async def on_unmount(self) -> None:
        await self._close_core()  # however the app ends, links and polls end with it
        if self._heap_frozen:
            gc.unfreeze()  # collectable again (another app in this process, tests)
            self._heap_frozen = False
            _thawed[0] = True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Every action of the registry, as seen from the screen under the palette; one that cannot
        # run says why (choosing it says so again). Textual's own Quit and Keys would be twins of ours.
        seen = actions._Assume(self, modal=isinstance(screen, ModalScreen))
        for a in actions.ACTIONS:
            keys = actions.display_keys(actions.keys_for(a.id, self.config.keymap))
            reason = actions.why_not(a, seen)
            note = f"not now: {reason}" if reason else ("asks first" if a.dangerous else "")
            yield SystemCommand(
                a.description, f"key {keys}" + (f" · {note}" if note else ""), partial(self.run_action, a.action)
            )
        for command in super().get_system_commands(screen):
            if command.title not in ("Quit", "Keys"):
                yield command

    # -- core events ------------------------------------------------------------------------
    @on(M.CoreEvent)
    def _core_event(self, msg: M.CoreEvent) -> None:
        # Shutdown removes the panes while this queue still drains: an event then has no pane to show it.
        if self._router is not None and self.is_running:
            self._router.deliver(msg.event)

    @handles(InventoryRound)
    def _inventory(self, e: InventoryRound) -> None:
        self.inventory_ready = True
        self.model_config = e.model_config or self.model_config
        self.last_subnet = e.last_subnet
        plan = self.plan
        self.nodes_pane.set_subnets(e.inventory.subnets, plan.subnet if plan else None)
        self._replace_inventory(e.inventory)
        self.refresh_bindings()
        pending, self._pending = self._pending, None
        if pending is not None:
            self.call_later(self.run_action, pending.action)

    @handles(NodeUpdated)
    def _facts(self, e: NodeUpdated) -> None:
        if self.inventory_ready:  # plans use what the cards show, not the round before (its end comes later)
            self._replace_inventory(replace(self.inventory, facts={**self.inventory.facts, e.facts.name: e.facts}))

    def _replace_inventory(self, inventory: Inventory) -> None:
        """The one inventory, replaced (never mutated): an open launch form follows it and re-checks its plan."""
        self.inventory = inventory
        for screen in self.screen_stack:
            if isinstance(screen, LaunchForm):
                screen.update_inventory(inventory)

    @handles(ConnectionChanged)
    def _link(self, ev: ConnectionChanged) -> None:
        before = self.links.get(ev.node)
        self.links[ev.node] = Link(ev.connected, ev.error)
        if before is not None and before.connected and not ev.connected:
            self.notify(f"{ev.node}: link lost ({ev.error or 'closed'})", severity="warning", markup=False)
        self._draw_status()

    @handles(TransferProgress)
    def _transfer(self, t: TransferProgress) -> None:
        if t.state == "done":
            self.notify(f"{t.kind} copy to {t.dest}: {t.message or 'done'}", markup=False)
        elif t.state in ("failed", "lost"):
            self.notify(f"{t.kind} copy to {t.dest} {t.state}: {t.message or ''}", severity="error", markup=False)

    @handles(Milestone)
    def _milestone(self, m: Milestone) -> None:
        if self._history(m.at):
            return
        if m.kind in NOTIFY_MILESTONES or (m.kind == MilestoneKind.WEIGHTS_LOADING and m.data.get("percent") == 100):
            slow = m.kind == MilestoneKind.TRANSPORT and m.data.get("transport") == "socket"  # NCCL fell back to TCP
            severity = "warning" if slow else "information"
            self.notify(f"{m.node or 'engine'}: {milestone_words(m.kind, m.data)}", severity=severity, markup=False)

    @handles(Problem)
    def _problem(self, p: Problem) -> None:
        key = actions.display_keys(actions.keys_for("pivot", self.config.keymap))
        if p.kind == ProblemKind.RENDEZVOUS_HANG:
            self.launch_pane.set_advice(pivot_advice(self.deployment.engine, key))
        if self._history(p.at):
            self._hang_told = self._hang_told or p.kind == ProblemKind.RENDEZVOUS_HANG
            self.refresh_bindings()
            return
        if p.kind == ProblemKind.RENDEZVOUS_HANG:
            if not self._hang_told:  # every rank hangs together: one notice per start, not one per node
                self._hang_told = True
                self.notify(hang_notice(p, key), title="Hang", severity="error", timeout=30, markup=False)
            self.refresh_bindings()
        else:
            where = f"{p.node}: " if p.node else ""
            self.notify(
                f"{where}{p.message}\nfix: {p.hint}",
                title=problem_words(p.kind),
                severity="warning" if p.provisional else "error",
                timeout=15,
                markup=False,
            )

    @handles(ProblemCleared)
    def _cleared(self, e: ProblemCleared) -> None:
        self.notify(f"withdrawn: {problem_words(e.problem.kind)} ({e.reason})", markup=False)

    @handles(DeploymentChanged)
    def _deployment(self, ev: DeploymentChanged) -> None:
        d = ev.deployment  # the core's snapshot itself, replaced whole
        if ev.state in (State.STOPPED, State.FAILED):
            d = d.but(endpoint=None, local=None)  # nothing answers there now: no key offers it
        elif d.local is None:
            d = d.but(local=self.deployment.local)  # the forward this app was told of (EndpointChecked)
        self.deployment = d  # the watcher redraws the status line and the keys
        detail = ev.detail or None
        if ev.state == State.READY and self._local():
            detail = f"{detail or 'ready'}\n{endpoint_words(self.endpoint, self._local())}"
        self.launch_pane.set_state(ev.state, detail)
        if not self._settled:
            pass  # the state found at start-up shows in the status line, not as news
        elif ev.state == State.READY:
            self.notify(
                f"ready: {endpoint_words(ev.endpoint, self._local()) if ev.endpoint else ev.detail}",
                title="Deployment",
                markup=False,
            )
        elif ev.state == State.HUNG and self._hang_told:
            pass  # the hang notice said it, with the fix
        elif ev.state in (State.FAILED, State.HUNG):
            self.notify(ev.detail or ev.state, title=f"Deployment {ev.state}", severity="error", markup=False)
        elif ev.state == State.UNHEALTHY:
            self.notify(ev.detail or ev.state, title="Endpoint unhealthy", severity="error", timeout=30, markup=False)
        elif ev.state == State.WEDGED:  # the problem event carries what to look at; r redeploys
            self.notify(
                f"{ev.detail} — r redeploys", title="Endpoint wedged", severity="error", timeout=30, markup=False
            )

    @handles(LaunchStep)
    def _step(self, s: LaunchStep) -> None:
        detail = f"step {s.index + 1}/{s.total} on {s.node}: {s.description} ({s.state})"
        self.launch_pane.set_state(self.deploy_state, detail)
        if s.state == "failed":
            self.notify(f"{s.node}: {s.description} failed: {s.detail}", severity="error", markup=False)

    @handles(EndpointChecked)
    def _endpoint(self, e: EndpointChecked) -> None:
        self._local_for = e.endpoint
        self.deployment = self.deployment.but(local=e.local)
        rate = f", {e.tokens_per_s:.1f} tok/s" if e.tokens_per_s else ""
        self.notify(
            f"{e.model} answered in {e.latency_s:.1f} s{rate} through the local SSH forward {e.local}",
            title="Endpoint",
            markup=False,
        )

    @on(M.OperationFailed)
    def _failed(self, msg: M.OperationFailed) -> None:
        self.notify(msg.error, title=f"{operation_name(msg.what)} failed", severity="error", timeout=20, markup=False)

    @on(M.OperationDone)
    def _done(self, msg: M.OperationDone) -> None:
        # a copy's end was told by its transfer ("model copy to spark2: verified ..."): not twice
        if msg.result and not any(msg.result in n.message for n in self._notifications):
            self.notify(msg.result, title=operation_name(msg.what), markup=False)
