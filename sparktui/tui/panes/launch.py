"""Launch pane: deployment state, the milestones timeline, logs (merged and per node), problems."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Input, Static, Tab, Tabs

from ...core.diagnosis.diagnose import Milestone, Problem, ProblemCleared
from ...core.state.events import (
    NodeMemory,
    PreflightFinished,
    PreflightNode,
    PreflightStage,
    PreflightStarted,
    ServingStats,
)
from ...core.state.states import ProblemKind, State
from ..controller import LogDrain
from ..present.deploy import preflight_text, problem_key, problem_lines, speed_note, state_badge, timeline
from ..present.memory import WIDTH as MEM_WIDTH
from ..present.memory import memory_line
from ..present.serving import serving_block
from ..ids import widget_id
from ..routing import handles
from ..widgets.log_view import LogView

ALL = "log-all"


class LaunchPane(Vertical):
    DEFAULT_CSS = """
    LaunchPane > #deploy-state { height: auto; max-height: 3; text-wrap: nowrap; text-overflow: ellipsis; }
    LaunchPane > #sim-note { height: 1; color: $warning; }
    LaunchPane > #collectives { height: 1; display: none; text-wrap: nowrap; text-overflow: ellipsis; }
    LaunchPane.-collectives > #collectives { display: block; }
    LaunchPane > #timeline { height: auto; max-height: 4; color: $text-muted; }
    LaunchPane > #preflight { height: auto; max-height: 6; display: none; }
    LaunchPane > #serving { height: auto; max-height: 6; display: none; }
    LaunchPane > #memory { height: auto; max-height: 4; display: none; text-wrap: nowrap; text-overflow: ellipsis; }
    LaunchPane.-memory > #memory { display: block; }
    LaunchPane.-serving > #serving { display: block; }
    LaunchPane.-preflight > #preflight { display: block; }
    LaunchPane > #log-tabs { height: 2; }
    LaunchPane > #log-filter { display: none; }
    LaunchPane.-filtering > #log-filter { display: block; }
    LaunchPane > #problems-box { height: auto; max-height: 6; border-top: solid $error; display: none; }
    LaunchPane.-problems > #problems-box { display: block; }
    LaunchPane #problems { height: auto; }
    """

    def __init__(self, nodes: list[str], max_lines: int = 100_000, sim_speed: float | None = None, **kw) -> None:
        super().__init__(**kw)
        self.nodes = nodes
        self.sim_speed = sim_speed  # a demo's engines run this many times faster: said under the state
        self.max_lines = max_lines
        self.milestones: list[Milestone] = []
        self.problems: dict[tuple, Problem] = {}
        self.state = "idle"
        self.detail = "press l to open the launch form"
        self._pf: dict | None = None  # the last preflight: nodes, rows, verdict
        self.advice: str | None = None  # the way out of a hang: first in the problems box, which is short
        self.memory: dict[str, tuple[NodeMemory, list[float]]] = {}  # node -> last reading, MemAvailable history

    def compose(self) -> ComposeResult:
        yield Static(state_badge(self.state, self.detail), id="deploy-state")
        if self.sim_speed:
            yield Static(speed_note(self.sim_speed), id="sim-note", markup=False)
        yield Static(id="collectives")
        yield Static(timeline([], self.nodes), id="timeline")
        yield Static(id="preflight")
        yield Static(id="memory")
        yield Static(id="serving")
        yield Tabs(Tab("all", id=ALL), *[Tab(n, id=widget_id("log", n)) for n in self.nodes], id="log-tabs")
        yield Input(placeholder="filter lines (Enter keeps it, Esc clears)", id="log-filter", compact=True)
        yield LogView(max_lines=self.max_lines, nodes=self.nodes, id="log")
        with VerticalScroll(id="problems-box"):
            yield Static(id="problems")

    @property
    def log(self) -> LogView:
        return self.query_one(LogView)

    # -- state from the app -------------------------------------------------------------------
    def set_state(self, state: str, detail: str | None = None) -> None:
        self.state, self.detail = state, detail
        if state in (State.IDLE, State.STARTING, State.STOPPING, State.STOPPED):
            self.set_class(False, "-serving")  # nothing serves: old numbers would mislead
        self.query_one("#deploy-state", Static).update(state_badge(state, detail))

    def set_plan(self, plan) -> None:
        """The plan being run: how its TP all-reduces cross nodes, when not NCCL alone (a b12x image's RoCE
        all-reduce), since decode speed there does not hang on NCCL's bandwidth. It stays until the next plan:
        a pivot's old deployment stops after the new plan is confirmed."""
        line = plan.collectives_line if plan is not None else None
        self.set_class(bool(line), "-collectives")
        self.query_one("#collectives", Static).update(Content.assemble(("ℹ ", "bold"), (line or "", "$text-muted")))

    @handles(Milestone)
    def add_milestone(self, m: Milestone) -> None:
        self.milestones.append(m)
        self.query_one("#timeline", Static).update(timeline(self.milestones, self.nodes))

    def set_serving(
        self, stats: dict, series: dict, unavailable: str | None = None, cannot_tell: str | None = None
    ) -> None:
        """From READY on: the engine's metrics (tokens/s, requests, KV cache, latency) with sparklines."""
        self.set_class(True, "-serving")
        self.query_one("#serving", Static).update(serving_block(stats, series, unavailable, cannot_tell))

    @handles(NodeMemory)
    def add_memory(self, e: NodeMemory) -> None:
        """One line per node through loading and serving: MemAvailable's sparkline, coloured by the level."""
        _, history = self.memory.get(e.sample.node, (e, []))
        if e.sample.available is not None:
            history = (history + [float(e.sample.available)])[-MEM_WIDTH:]
        self.memory[e.sample.node] = (e, history)
        self.set_class(True, "-memory")
        width = max(map(len, self.memory))
        lines = [memory_line(ev, h, width) for ev, h in (self.memory[n] for n in sorted(self.memory))]
        self.query_one("#memory", Static).update(Content("\n").join(lines))

    @handles(ServingStats)
    def _serving(self, e: ServingStats) -> None:
        self.set_serving(e.stats, e.series, e.unavailable, e.cannot_tell)

    def reset(self) -> None:
        """A new launch: the timeline and problems start over; logs stay for comparison."""
        self.set_class(False, "-serving")
        self.set_class(False, "-memory")
        self.memory.clear()
        self.milestones.clear()
        self.problems.clear()
        self.advice = None
        self.query_one("#timeline", Static).update(timeline([], self.nodes))
        self._draw_problems()

    # -- the preflight, a row per node ----------------------------------------------------------------
    def preflight_begin(self, nodes: list[str], head: str) -> None:
        self._pf = {"nodes": nodes, "head": head, "rows": {}, "stages": {}, "verdict": None, "error": None}
        self._draw_preflight()

    def preflight_row(self, result) -> None:
        if self._pf is not None:
            self._pf["rows"][result.node] = result
            self._draw_preflight()

    def preflight_stage(self, node: str, stage: str) -> None:
        if self._pf is not None:
            self._pf["stages"][node] = stage
            self._draw_preflight()

    def preflight_done(self, verdict, error: str | None = None) -> None:
        if self._pf is not None:
            self._pf["verdict"], self._pf["error"] = verdict, error
            if verdict is not None:
                self._pf["rows"].update(verdict.nodes)
            self._draw_preflight()

    @handles(PreflightStarted)
    def _preflight_started(self, e: PreflightStarted) -> None:
        self.preflight_begin(e.nodes, f"{e.addr} on {e.subnet} in {e.image}")

    @handles(PreflightNode)
    def _preflight_node(self, e: PreflightNode) -> None:
        self.preflight_row(e.result)

    @handles(PreflightStage)
    def _preflight_stage(self, e: PreflightStage) -> None:
        self.preflight_stage(e.node, e.stage)

    @handles(PreflightFinished)
    def _preflight_finished(self, e: PreflightFinished) -> None:
        self.preflight_done(e.verdict, None if e.verdict is not None else e.summary)

    def preflight_content(self):
        pf = self._pf
        return (
            None
            if pf is None
            else preflight_text(pf["head"], pf["nodes"], pf["rows"], pf["verdict"], pf["error"], pf["stages"])
        )

    def _draw_preflight(self) -> None:
        content = self.preflight_content()
        self.set_class(content is not None, "-preflight")
        if content is not None:
            self.query_one("#preflight", Static).update(content)

    @handles(Problem)
    def add_problem(self, p: Problem) -> None:
        self.problems[problem_key(p)] = p
        if p.text:
            self.log.mark_problem(p.text)
        self._draw_problems()

    def clear_problem(self, p: Problem) -> None:
        self.problems.pop(problem_key(p), None)
        self._draw_problems()

    @handles(ProblemCleared)
    def _problem_cleared(self, e: ProblemCleared) -> None:
        self.clear_problem(e.problem)

    def set_advice(self, advice: str | None) -> None:
        self.advice = advice
        self._draw_problems()

    def _draw_problems(self) -> None:
        from textual.content import Content

        self.set_class(bool(self.problems), "-problems")
        hung = any(p.kind == ProblemKind.RENDEZVOUS_HANG for p in self.problems.values())
        first = [Content.styled(f"→ {self.advice}", "$warning bold")] if hung and self.advice else []
        self.query_one("#problems", Static).update(
            Content("\n").join(first + [problem_lines(p) for p in self.problems.values()])
        )

    # -- logs -------------------------------------------------------------------------------
    def add_lines(self, node: str, lines: list[str], stamps: list | None = None, ack=None) -> None:
        self.log.add(node, lines, stamps, ack)

    @handles(LogDrain)
    def _drain(self, drain: LogDrain) -> None:
        # The drain is taken when handled, not when posted: one message however many batches came.
        add = self.log.add
        for batch in drain.take():
            add(batch.node, batch.lines, batch.stamps, batch.ack)

    @on(Tabs.TabActivated, "#log-tabs")
    def _tab(self, event: Tabs.TabActivated) -> None:
        event.stop()
        tid = event.tab.id or ALL
        by_id = {widget_id("log", n): n for n in self.nodes}
        self.log.show_node(by_id.get(tid))  # "all" (or anything unknown) shows every node

    def cycle_node(self, step: int) -> None:
        """The next (or previous) log tab: all, then each node in turn."""
        tabs = self.query_one("#log-tabs", Tabs)
        ids = [ALL] + [widget_id("log", n) for n in self.nodes]
        at = ids.index(tabs.active) if tabs.active in ids else 0
        tabs.active = ids[(at + step) % len(ids)]

    def open_filter(self) -> None:
        self.add_class("-filtering")
        box = self.query_one("#log-filter", Input)
        box.value = self.log.filter_text
        # at once, not when the queue drains (as focus() does): keys typed right behind / come next
        self.screen.set_focus(box)

    @on(Input.Changed, "#log-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.log.set_filter(event.value)

    @on(Input.Submitted, "#log-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        if not event.value:  # an active filter stays visible so nobody wonders where lines went
            self.remove_class("-filtering")
        self.log.log.focus()

    def key_escape(self) -> None:
        if self.has_class("-filtering"):
            self.query_one("#log-filter", Input).value = ""
            self.log.set_filter("")
            self.remove_class("-filtering")
            self.log.log.focus()
