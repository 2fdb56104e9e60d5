"""The deploy orchestrator: launch / stop / pivot / redeploy / reattach, told as events.

A plain async object that the CLI and the TUI drive alike. It runs a plan's steps in order,
follows every engine container's log (resuming after a dropped link), feeds the lines to the
Diagnoser, ticks it so silence counts, and proves readiness with a real chat completion through an
SSH forward to the head. Containers are found and removed by label only; the options of the
current launch are kept on the head (record.py) so a new process can pivot or redeploy.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
import time
from typing import Callable

from ..state import labels as L
from ..remote.channels import SESSIONS_NEEDED
from ..config.config import Config
from ..diagnosis.diagnose import Diagnoser, Event, Milestone, Problem, ProblemCleared, strip_prefixes
from ..engines import logsigns as S
from ..network.fabric_live import Live
from ..network.paths import rendezvous_fix
from ..engines import DEFAULT_ENGINE, ENGINES, default_mode, runs_ray
from ..engines.common import Nested, Step, safe_name
from ..state.events import (
    DeploymentChanged,
    EndpointChecked,
    EndpointHealth,
    EventBus,
    Gate,
    LaunchStep,
    LogLines,
    NodeMemory,
    ServingStats,
)
from ..nodes.facts import Container
from ..plan.plan import Plan, PlanOptions
from ..remote.ssh import Cluster, Node
from ..state.statefile import StateFileError
from ..state.states import SETTLED, MilestoneKind, ProblemKind as PK, State
from . import containers as C
from . import stopmark
from .logstream import LogBatch, LogFollower
from .options import Planner, api_key_of, inventory_planner, options_of, other_engine, pivot_notes, pivot_options
from .health import FAILS_BEFORE_UNHEALTHY, HEALTH_INTERVAL_S, probe_health
from .memwatch import MemFiles, watch_memory
from .metrics_read import Target
from .readiness import Check, check_endpoint
from .serving import LOOK_AT, ServingWatch
from ..state.deployment import Deployment
from ..state.words import problem_words
from .record import STATE_DIR, load_record, save_record
from .watchdog import tick_interval, watch

READY_TIMEOUT_S = 2400.0  # a ~120 GB checkpoint took ~15 min to load on two Sparks; leave room
STEP_TIMEOUT_S = 300.0  # one docker run / exec (an image pull is not part of a launch)
WAIT_STEP_DEFAULT_S = 600.0
LATE_START_WAIT_S = 60.0  # a killed launch's `docker run` may still be creating its container (vfs: slow)
CREATED_GRACE_S = 10.0  # docker run creates, then starts: one created for longer lost its client


class DeployError(Exception):
    """A launch, stop or pivot could not go ahead; str() says why in plain words."""


class DeploymentExists(DeployError):
    """Containers of this deployment are already there and the caller must say what to do."""

    def __init__(self, deployment: str, found: dict[str, C.Found], reason: str):
        self.deployment = deployment
        self.found = found
        super().__init__(reason)

    def lines(self) -> list[str]:
        return [
            f"{f.node}: {c.name} ({L.engine_of(c.labels)}, {c.state})"
            for f in self.found.values()
            for c in f.containers
        ]


def exec_signature(step: Step) -> str | None:
    """Words that show an exec step's process is already running (`vllm serve`), for a resumed launch."""
    for w in step.words:
        if isinstance(w, Nested):
            words = [x for x in w.words if isinstance(x, str)]
            return " ".join(words[:2]) if words else None
    return None


class Deployer:
    """Launch, watch, stop, pivot, redeploy and reattach one deployment; every change is an event on `bus`."""

    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        bus: EventBus,
        *,
        deployment: str | None = None,
        planner: Planner | None = None,
        hang_after: float | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
        poll_interval: float = 2.0,
        wait_interval: float | None = None,
        step_timeout: float = STEP_TIMEOUT_S,
        reconnect_timeout: float = 900.0,
        stop_grace: int = C.STOP_GRACE_S,
        health_interval: float = HEALTH_INTERVAL_S,
        mem_files: dict[str, MemFiles] | None = None,
    ):
        self.cluster = cluster
        self.config = config
        self.bus = bus
        self.name = safe_name(deployment or config.cluster)
        self.planner = planner or inventory_planner(cluster, config)
        self.hang_after = hang_after if hang_after is not None else config.engine.hang_after
        self.ready_timeout = ready_timeout
        self.poll_interval = poll_interval
        self.wait_interval = wait_interval  # None: each wait step's own interval
        self.step_timeout = step_timeout
        self.reconnect_timeout = reconnect_timeout
        self.stop_grace = stop_grace
        self.health_interval = health_interval
        self.mem_files = mem_files or {}  # node -> where the memory guard reads it; others: /proc
        self.memory: dict[str, NodeMemory] = {}  # node -> its latest reading and verdict
        self._halted: str | None = None  # why the memory guard stopped this launch
        # The one place where the deployment stands (state, detail, endpoint): a new snapshot on each change
        self.current = Deployment.empty(self.name, State.STOPPED)
        self.plan: Plan | None = None
        self.diagnoser: Diagnoser | None = None
        self.check: EndpointChecked | None = None
        self.last_check: Check | None = None
        self.warnings: list[str] = []
        self.fabric = Live()  # per node, the transport its rank's NCCL reports
        self.net_milestones: list[Milestone] = []
        self.own_problems: list[Problem] = []  # what the orchestrator found itself (a step failed, not ready)
        self.followers: dict[tuple[str, str], LogFollower] = {}
        self._jobs: dict[str, asyncio.Task] = {}
        self._watch: ServingWatch | None = None  # while ready: the wedged judgement, told of log signs too
        self._offsets: dict[str, float] = {}
        self._changed = asyncio.Event()
        self._deadline: float | None = None  # monotonic end of the current launch (its ready_timeout)
        self._resumed = 0  # containers this launch found running of its very plan and left as they were

    # ---- state and events ---------------------------------------------------------------------

    def _emit(self, event) -> None:
        self.bus.emit(event)

    def _set(self, state: State, detail: str = "", endpoint: str | None = None) -> None:
        """A new snapshot where the deployment stands now; an event when its state or detail changed."""
        state = State(state)
        cur = self.current
        endpoint = cur.endpoint if endpoint is None else endpoint
        if (state, detail) == (cur.state, cur.detail):
            if endpoint != cur.endpoint:
                self.current = cur.but(endpoint=endpoint)
            return
        if state in (State.FAILED, State.HUNG) and self._resumed and cur.state not in (State.FAILED, State.HUNG):
            self._resume_failed()
        self.current = cur = cur.but(state=state, detail=detail, endpoint=endpoint)
        self._emit(DeploymentChanged(cur))  # the snapshot itself: the next change is another one
        self._changed.set()

    def _resume_failed(self) -> None:
        # launching the same plan again would resume the same broken containers and fail again
        self._problem(
            PK.RESUMED_BROKEN,
            self.current.head or None,
            f"this launch resumed {self._resumed} container(s) already running this plan and started "
            f"nothing anew: what runs there is broken, and launching again resumes it again",
            "`sparktui redeploy` stops them and starts this plan afresh",
        )

    async def wait(self, timeout: float | None = None, until: tuple[State, ...] = SETTLED) -> State:
        """The state once it is one of `until` (or whatever it is when `timeout` runs out)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.current.state not in until:
            self._changed.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return self.current.state

    @property
    def problems(self) -> list[Problem]:
        """Active problems: the Diagnoser's (from the logs) and the orchestrator's own."""
        return (list(self.diagnoser.problems) if self.diagnoser else []) + list(self.own_problems)

    @property
    def milestones(self) -> list[Milestone]:
        return (list(self.diagnoser.milestones) if self.diagnoser else []) + list(self.net_milestones)

    def _on_diag(self, events: list[Event]) -> None:
        for e in events:
            self._emit(e)
        if not events or self.diagnoser is None or self.current.state in (State.STOPPING, State.STOPPED):
            return
        d = self.diagnoser
        if d.state == State.FAILED:
            if self.current.state == State.FAILED:
                return
            p = next(p for p in d.problems if p.kind != PK.RENDEZVOUS_HANG)
            # a stop from another terminal makes the engines fail on their way out: ask the head first
            self._spawn("stopped?", self._fail_unless_stopped(_problem_words(p)))
        elif d.state == State.HUNG:
            self._set(State.HUNG, _problem_words(d.problems[0]))
        elif self.current.state in (State.FAILED, State.HUNG) and any(isinstance(e, ProblemCleared) for e in events):
            self._set(d.state, "the engine went on after all")
        elif self.current.state == State.STARTING and d.state == State.LOADING:
            self._set(State.LOADING, "the engine is loading")

    def _on_lines(self, node: str, container: str, lines: LogBatch, gate: Gate | None = None) -> None:
        self._emit(LogLines(node, container, lines.texts, lines.keys, flow=gate))  # the columns, not copies
        d = self.diagnoser
        if d is None:
            return
        off = self._offsets.get(node, 0.0)
        times = [None if k is None else k / 1e9 - off for k in lines.keys]
        self._on_diag(d.feed_batch(lines.texts, node, times))
        if self._watch is not None and d.ready:  # a worker the engine waits for: the wedge's log sign
            for text in lines.texts:
                if S.WORKER_WAIT in text:
                    self._watch.live.worker_stalled(strip_prefixes(text))
        for who, view in self.fabric.feed(node, lines.texts).items():  # what each rank's NCCL uses (fabric_live)
            m = Milestone(MilestoneKind.NCCL_NET, 0, who, time.time(), view, view["label"])
            self.net_milestones.append(m)
            self._emit(m)

    def _problem(self, kind: PK, node: str | None, message: str, hint: str) -> None:
        p = Problem(kind, 0, message, hint, node, time.time())
        self.own_problems.append(p)
        self._emit(p)

    # ---- background work ----------------------------------------------------------------------

    def _spawn(self, key: str, coro) -> None:
        old = self._jobs.get(key)
        if old is not None and not old.done():
            coro.close()
            return
        self._jobs[key] = asyncio.get_running_loop().create_task(coro, name=f"sparktui-deploy-{key}")

    async def close(self) -> None:
        """Stop following and probing (the containers keep running)."""
        # the memory guard closes from its own task on its way to stopping: it ends by itself
        me = asyncio.current_task()
        pending = [t for t in self._jobs.values() if not t.done() and t is not me]
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self._jobs.clear()
        self.followers.clear()

    def _follow(self, node: str, container: str) -> None:
        key = (node, container)
        if key in self.followers:
            return
        gate = Gate()  # a screen that falls behind pauses this stream's reading
        f = LogFollower(
            self.cluster[node],
            container,
            lambda lines: self._on_lines(node, container, lines, gate),
            reconnect_timeout=self.reconnect_timeout,
            gate=gate,
        )
        self.followers[key] = f
        self._spawn(f"logs:{node}:{container}", self._run_follower(node, container, f))

    async def _run_follower(self, node: str, container: str, f: LogFollower) -> None:
        why = await f.run()
        if self.current.state in (State.STOPPING, State.STOPPED):
            return
        if why == "lost":
            self._problem(
                PK.LOG_STREAM_LOST,
                node,
                f"lost {container}'s log: {node} stayed unreachable",
                "check the node's link; `sparktui logs` reads the log again once it is back",
            )
        elif why in ("exited", "removed") and self.current.state != State.FAILED:
            if await self._stopped_elsewhere():
                return
            code = await self._exit_words(node, container) if why == "exited" else "was removed"
            msg = f"{container} on {node} {code}"
            if self.diagnoser is not None and self.diagnoser.ready:
                msg += " while serving"  # it had started: this is not a start-up failure
            self._problem(PK.CONTAINER_EXITED, node, msg, "read its last log lines above (sparktui logs)")
            self._set(State.FAILED, msg)

    async def _stopped_elsewhere(self) -> bool:
        """When `sparktui stop` ran from another process since this launch: say "stopped", and true."""
        if self.current.state in (State.STOPPING, State.STOPPED):
            return True
        try:
            asked = await stopmark.stopped(self.cluster[self.config.head.name], self.name)
        except Exception:  # noqa: BLE001 - the head cannot say: judge by the logs alone
            asked = False
        if asked and self.current.state not in (State.STOPPING, State.STOPPED):
            self._set(
                State.STOPPED,
                "stopped from elsewhere: `sparktui stop` removed its containers (the engines' "
                "errors above are from being stopped)",
            )
        return asked

    async def _fail_unless_stopped(self, words: str) -> None:
        if not await self._stopped_elsewhere() and self.current.state not in (
            State.FAILED,
            State.STOPPING,
            State.STOPPED,
        ):
            self._set(State.FAILED, words)

    async def _exit_words(self, node: str, container: str) -> str:
        r = await self.cluster[node].run(
            ["docker", "inspect", "--format", "{{.State.ExitCode}} {{.State.OOMKilled}}", container], timeout=30
        )
        parts = r.stdout.split() if r.ok else []
        if len(parts) == 2:
            return f"exited with code {parts[0]}" + (" (killed: out of memory)" if parts[1] == "true" else "")
        return "exited"

    async def _measure_offsets(self, nodes: list[str]) -> None:
        """Each node's clock minus ours, so a node's log timestamps count silence on our clock."""

        async def one(name: str) -> None:
            t0 = time.time()
            r = await self.cluster[name].run(["date", "+%s"], timeout=15)
            t1 = time.time()
            try:
                off = float(r.stdout.strip()) + 0.5 - (t0 + t1) / 2
            except ValueError:
                return
            self._offsets[name] = off if abs(off) > 2.0 else 0.0  # whole seconds: ignore what they can't tell

        await asyncio.gather(*(one(n) for n in nodes))

    def _begin(self, cur: Deployment) -> None:
        # where it stood carries over until the launch or reattach says otherwise; the endpoint is proven anew
        self.current = cur.but(state=self.current.state, detail=self.current.detail, endpoint=None)
        self.name = cur.deployment
        plan = self.plan if self.plan is not None and self.plan.plan_id == cur.plan_id else None
        self.diagnoser = Diagnoser(
            cur.engine,
            self.hang_after,
            model_path=cur.options.model_path if cur.options and cur.options.model_path else self.config.model.path,
            # with Ray only the head inits
            expect=() if runs_ray(cur.engine, cur.mode) else cur.containers,
            limits=self.config.engine.phase_limits,
            env_set=self._env_everywhere(cur),
            hang_fix=rendezvous_fix(plan.fabric.get("paths")) if plan is not None else "",
        )
        self.check = None
        self.last_check = None
        self.own_problems = []
        nodes = plan.nodes if plan is not None else []
        self.fabric = Live(
            {n.name: n.env.get("NCCL_IB_HCA", "") for n in nodes},
            {n.name: bool(n.rdma) for n in nodes},
            {n.ip: n.name for n in nodes if n.ip},
        )
        self.net_milestones = []
        interval = tick_interval(self.hang_after)
        self._spawn("watchdog", self._watchdog(interval))
        self.memory = {}
        self._halted = None
        watched = [n.name for n in nodes] or cur.nodes or list(cur.containers)
        if watched:
            self._spawn("memory", watch_memory(self, watched, self.mem_files))

    def _env_everywhere(self, cur: Deployment) -> set[str]:
        """Variables this launch's plan sets on every node (none known for a reattached deployment)."""
        plan = self.plan if self.plan is not None and self.plan.plan_id == cur.plan_id else None
        if plan is None or not plan.nodes:
            return set()
        return set.intersection(*({k for k, v in n.env.items() if v} for n in plan.nodes))

    async def _watchdog(self, interval: float) -> None:
        assert self.diagnoser is not None
        # Bounded: past the readiness deadline silence means nothing new (and the engine is up or gone).
        await watch(self.diagnoser, self._on_diag, interval, max_ticks=int(self.ready_timeout / interval) + 1)

    def _endpoint_url(self, cur: Deployment) -> str:
        return f"http://{self.config.node(cur.head).host}:{cur.port}/v1"

    def _left(self) -> float:
        """Seconds left of the launch's timeout (the whole launch, steps included, honours it)."""
        return self.ready_timeout if self._deadline is None else self._deadline - time.monotonic()

    async def _check_sessions(self, nodes: list[str]) -> None:
        """Refuse a launch that could never watch itself: a node whose sshd (MaxSessions) or whose
        ssh.max_channels allows fewer channels at once than a launch holds there."""
        why = [
            w
            for w in await asyncio.gather(
                *(self.cluster[n].sessions_short(SESSIONS_NEEDED, max(1.0, min(30.0, self._left()))) for n in nodes)
            )
            if w
        ]
        if not why:
            return
        raise DeployError(
            f"a launch needs {SESSIONS_NEEDED} SSH sessions at once on each node (one follows the "
            f"engine's log while commands run); nothing was started: " + "; ".join(why)
        )

    async def _readiness(self, cur: Deployment) -> None:
        node = self.cluster[cur.head]
        deadline = self._deadline if self._deadline is not None else time.monotonic() + self.ready_timeout
        local: int | None = None
        while time.monotonic() < deadline:
            if self.current.state in (State.FAILED, State.STOPPING, State.STOPPED):
                return
            if local is None:
                try:
                    local = await node.forward(cur.port)
                except Exception as e:  # noqa: BLE001 - link down or forwarding refused: try again later
                    self.last_check = Check(False, "forward", f"port forward to {cur.head}:{cur.port}: {e}")
                    await asyncio.sleep(self.poll_interval)
                    continue
            chk = await check_endpoint(
                f"http://127.0.0.1:{local}", cur.served_model_name, api_key=api_key_of(cur.options)
            )
            self.last_check = chk
            if chk.ok:
                ev = EndpointChecked(
                    cur.deployment,
                    self._endpoint_url(cur),
                    f"http://127.0.0.1:{local}/v1",
                    chk.model or "",
                    chk.latency_s or 0.0,
                    chk.completion_tokens,
                    chk.tokens_per_s,
                    chk.reply,
                )
                self.check = ev
                self._emit(ev)
                rate = f", {chk.tokens_per_s:.1f} tok/s" if chk.tokens_per_s else ""
                self._set(State.READY, f"{chk.model} answered in {chk.latency_s:.2f} s{rate}", self._endpoint_url(cur))
                self._spawn("health", self._health(cur, local))
                return
            if chk.refused:
                local = None  # the forward died with the old connection
            await asyncio.sleep(self.poll_interval)
        if self.current.state not in (State.FAILED, State.STOPPING, State.STOPPED):
            why = self.last_check.detail if self.last_check else "no answer"
            self._problem(
                PK.NOT_READY,
                cur.head,
                f"not ready after {self.ready_timeout:g} s ({why})",
                "the log shows how far loading got; a large checkpoint may need a longer --timeout",
            )
            self._set(State.FAILED, f"not ready after {self.ready_timeout:g} s: {why}")

    async def _health(self, cur: Deployment, local: int | None) -> None:
        """While ready (or unhealthy, or wedged), poll /health so an engine that dies later shows at once, and
        after each healthy answer read its metrics and judge whether tokens still come out (wedged)."""
        node = self.cluster[cur.head]
        url = self._endpoint_url(cur)
        watch = ServingWatch(
            node,
            Target(cur.deployment, cur.engine, cur.head, cur.port),
            cur.served_model_name or (self.check.model if self.check else None),
            api_key_of(cur.options),
            self.config.engine.wedge_after,
        )
        self._watch = watch
        try:
            await self._health_loop(cur, node, url, local, watch)
        finally:
            watch.close()
            if self._watch is watch:
                self._watch = None

    async def _health_loop(self, cur: Deployment, node: Node, url: str, local: int | None, watch: ServingWatch) -> None:
        fails = 0
        while self.current.state in (State.READY, State.UNHEALTHY, State.WEDGED):
            await asyncio.sleep(self.health_interval)
            if local is None:
                try:
                    local = await node.forward(cur.port)
                except Exception as e:  # noqa: BLE001 - the link is down: that is an unhealthy answer too
                    ok, detail, refused = False, f"no forward to {cur.head}:{cur.port} ({e})", False
                else:
                    ok, detail, refused = await probe_health(f"http://127.0.0.1:{local}")
            else:
                ok, detail, refused = await probe_health(f"http://127.0.0.1:{local}")
            if refused:
                local = None  # the forward died with the old connection; a new one next round
            if self.current.state not in (State.READY, State.UNHEALTHY, State.WEDGED):
                return
            if ok:
                fails = 0
                if self.current.state is State.UNHEALTHY:
                    self._emit(EndpointHealth(cur.deployment, url, True, "healthy again"))
                    self._set(State.READY, "the endpoint answers /health again", url)
                await self._serving(cur, url, local, watch)
                continue
            fails += 1
            if fails == FAILS_BEFORE_UNHEALTHY and self.current.state in (State.READY, State.WEDGED):
                self._emit(EndpointHealth(cur.deployment, url, False, detail))
                self._problem(
                    PK.ENDPOINT_UNHEALTHY,
                    cur.head,
                    f"{url} stopped answering ({detail})",
                    "the engine may have died: its last log lines say why (sparktui logs)",
                )
                self._set(State.UNHEALTHY, f"{url}: {detail}")

    async def _serving(self, cur: Deployment, url: str, local: int | None, watch: ServingWatch) -> None:
        """Metrics after a healthy poll, and the wedged judgement (back to ready when tokens flow)."""
        why = await watch.tick(local)
        v = watch.view
        series = {
            f: v.series(f)[-120:]
            for f in ("generation_tokens", "prompt_tokens", "kv_cache_usage", "running", "waiting")
        }
        self._emit(ServingStats(cur.deployment, v.to_json(), series, watch.unavailable, watch.live.cannot_tell))
        if self.current.state not in (State.READY, State.WEDGED):
            return
        if why and self.current.state is State.READY:
            self._problem(PK.WEDGED, cur.head, f"{url} is wedged: {why}", LOOK_AT)
            self._set(State.WEDGED, f"wedged: {why}", url)
        elif not why and self.current.state is State.WEDGED:
            for p in [p for p in self.own_problems if p.kind == PK.WEDGED]:
                self.own_problems.remove(p)
                self._emit(ProblemCleared(p, "tokens flow again"))
            self._set(State.READY, "tokens flow again", url)

    # ---- launch -------------------------------------------------------------------------------

    async def existing(self, nodes: list[str] | None = None) -> dict[str, C.Found]:
        """This deployment's containers on every node (or `nodes`)."""
        return await C.find_all(self.cluster, self.name, nodes)

    async def launch(self, plan: Plan, options: PlanOptions | None = None, *, if_exists: str = "ask") -> None:
        """Run the plan's steps in order and start watching; returns once every step ran.

        if_exists: what to do when this deployment's containers already run. Those of this very plan
        are resumed (their steps skipped, nothing started twice) unless "replace"; others raise
        DeploymentExists ("ask"), are stopped first ("replace") or watched as they are ("reattach").
        """
        if not plan.ok:
            raise DeployError("the plan has errors: " + "; ".join(plan.errors))
        if not plan.steps:
            raise DeployError("the plan has no steps to run")
        if if_exists not in ("ask", "replace", "reattach"):
            raise ValueError(f"if_exists must be ask, replace or reattach (got {if_exists!r})")
        await self.close()
        self._deadline = time.monotonic() + self.ready_timeout
        self.name = plan.deployment
        self._resumed = 0
        await self._check_sessions([n.name for n in plan.nodes])
        resume = await self._prepare(plan, if_exists)
        if resume is None:
            return  # reattached
        opts = copy.deepcopy(options) if options is not None else options_of(plan)
        opts.model_config = None
        cur = Deployment.from_plan(plan, opts)
        self.plan = plan
        self.warnings = []
        await self._measure_offsets([n.name for n in plan.nodes])
        with contextlib.suppress(Exception):  # what ran before is replaced: a stop from now on is of this launch
            await stopmark.clear(self.cluster[self.config.head.name], plan.deployment)
        self._begin(cur)
        err = await save_record(self.cluster[self.config.head.name], cur)
        if err:
            self.warnings.append(
                f"could not keep the deployment record on {self.config.head.name}: {err} "
                f"(pivot and redeploy from another process will not know the options)"
            )
        started = self._resumed = sum(len(v) for v in resume.values())
        self._set(
            State.STARTING,
            f"resuming: {started} container(s) of this plan already run"
            if started
            else f"{len(plan.steps)} steps on {len(plan.nodes)} node(s)",
        )
        ok = await self._run_steps(plan, resume)
        if self._halted:  # a step under way when the memory guard stopped it may have made its container since
            await self.wait(90.0, until=(State.FAILED,))  # its own removal first
            await self._remove_all(grace=0)
            return
        if not ok:
            return
        if self.current.state == State.STARTING:
            self._set(State.STARTING, "every step ran; waiting for the engine")
        self._spawn("ready", self._readiness(cur))

    async def _prepare(self, plan: Plan, if_exists: str) -> dict[str, set[str]] | None:
        """Look for this deployment's containers first; returns what to resume (None: reattached)."""
        found = await self.existing()
        down = [f"{f.node}: {f.error}" for f in found.values() if f.error]
        if down:
            raise DeployError("cannot tell what already runs: " + "; ".join(down))
        ours = [(f.node, c) for f in found.values() for c in f.containers]
        running = [(n, c) for n, c in ours if c.state == "running"]
        if not ours:
            return {}
        same = all(c.labels.get(L.PLAN) == plan.plan_id for _, c in ours)
        if running and if_exists != "replace":
            if same and len(running) == len(ours):
                out: dict[str, set[str]] = {}
                for n, c in running:
                    out.setdefault(n, set()).add(c.name)
                return out
            if if_exists == "reattach":
                await self.reattach()
                return None
            why = (
                "some of its containers have exited"
                if same
                else f"they run another plan ({', '.join(sorted({L.plan_of(c.labels) for _, c in ours}))})"
            )
            raise DeploymentExists(
                self.name,
                {k: v for k, v in found.items() if v.containers},
                f"deployment {self.name} already has containers: {why}",
            )
        # Only leftovers of an earlier run (or "replace"): they are ours, and their names are in the way.
        await self.stop()
        return {}

    async def _run_steps(self, plan: Plan, resume: dict[str, set[str]]) -> bool:
        total = len(plan.steps)
        for i, step in enumerate(plan.steps):
            if self.current.state in (State.FAILED, State.STOPPING):
                return False
            node = self.cluster[step.node]

            def tell(state: str, detail: str = "") -> None:
                self._emit(LaunchStep(plan.deployment, step.node, i, total, step.kind, step.description, state, detail))

            if self._left() <= 0:
                msg = f"the launch's timeout of {self.ready_timeout:g} s ran out before step {i + 1}/{total}"
                tell("failed", msg)
                self._problem(PK.LAUNCH_TIMEOUT, step.node, msg, "a longer --timeout, or see which step was slow above")
                self._set(State.FAILED, msg)
                return False
            tell("running")
            if self.current.state in (State.STARTING, State.LOADING):
                self._set(self.current.state, f"step {i + 1}/{total} on {step.node}: {step.description}")
            if step.kind in ("run", "exec") and resume:
                skip = await self._already_done(node, step, resume)
                if skip:
                    tell("skipped", skip)
                    self._follow(step.node, step.container)
                    continue
            if step.kind == "wait":
                ok, detail = await self._wait_step(node, step, tell)
            else:
                ok, detail = await self._run_one(node, step)
                if not ok and step.kind == "run" and _name_conflict(detail):
                    late = await self._started_late(node, step, plan.plan_id)
                    if late:
                        tell("skipped", late)
                        self._follow(step.node, step.container)
                        continue
                    if late == "":  # ours, never started: it is gone now, so the step runs once more
                        ok, detail = await self._run_one(node, step)
                if ok or step.kind == "run":
                    self._follow(step.node, step.container)  # a failed run may still have made the container
            if not ok and self._halted:  # the memory guard stopped it: its reason stands
                tell("failed", self._halted)
                return False
            if not ok:
                tell("failed", detail)
                msg = f"step {i + 1}/{total} on {step.node} failed ({step.description}): {detail}"
                self._problem(PK.LAUNCH_STEP_FAILED, step.node, msg, _step_hint(step, detail))
                self._set(State.FAILED, msg)
                return False
            tell("done", detail)
        return True

    async def _already_done(self, node: Node, step: Step, resume: dict[str, set[str]]) -> str:
        if step.kind == "run":
            return "already running (same plan)" if step.container in resume.get(step.node, set()) else ""
        needle = exec_signature(step)
        if needle and await C.process_running(node, step.container, needle):
            return f"`{needle}` already runs in {step.container}"
        return ""

    async def _run_one(self, node: Node, step: Step) -> tuple[bool, str]:
        r = await node.run(
            step.command,
            timeout=max(1.0, min(self.step_timeout, self._left())),
            input=step.stdin or None,
            shown=step.display or None,
        )
        if r.ok:
            return True, r.stdout.strip()[:64]
        return False, _last_line(r.stderr or r.stdout) or f"exit {r.exit_status}"

    async def _started_late(self, node: Node, step: Step, plan_id: str) -> str | None:
        """The container in the way, when it is this very plan's, made by an earlier launch whose
        `docker run` was still on its way when this one looked (a launch killed mid-step).

        Returns words for a resumed step when it came up running; "" when it was ours but never ran
        (its maker died between create and start), so it is removed for the step to run again;
        None when it is not this plan's (at once: a stranger's name clash is said as docker said it).
        """
        deadline = time.monotonic() + max(0.0, min(LATE_START_WAIT_S, self._left()))
        created_since: float | None = None
        while True:
            found = await C.inspect_one(node, step.container)
            now = time.monotonic()
            if found is not None:
                labels, state = found
                if labels.get(L.PLAN) != plan_id:
                    return None
                if state == "running":
                    return "already running (same plan, started by an earlier launch)"
                created_since = created_since or now
                if state != "created" or now - created_since >= CREATED_GRACE_S or now >= deadline:
                    return "" if await C.remove_one(node, step.container) is None else None
            elif now >= deadline:  # docker holds the name while it makes the container; inspect sees it after
                return None
            await asyncio.sleep(0.5)

    async def _wait_step(self, node: Node, step: Step, tell: Callable[[str, str], None]) -> tuple[bool, str]:
        own = step.timeout or WAIT_STEP_DEFAULT_S
        limit = max(1.0, min(own, self._left()))  # the launch's own timeout bounds every wait in it
        deadline = time.monotonic() + limit
        # Quick first polls (a Ray cluster often forms in seconds), then the step's own pace.
        delays = [d for d in (1.0, 2.0) if d < step.interval] if self.wait_interval is None else []
        last = shown = ""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                why = "" if limit >= own else " (the launch's timeout)"
                return False, f"gave up after {limit:g} s{why}" + (f"; last answer: {last}" if last else "")
            if self.current.state == State.FAILED:
                return False, "the engine failed meanwhile"
            r = await node.run(step.command, timeout=max(1.0, min(60.0, left)), shown=step.display or None)
            if r.ok and step.matches(r.stdout):
                return True, f"after {limit - left:.0f} s"
            last = _last_line(r.stdout if r.ok else (r.stderr or r.stdout)) or f"exit {r.exit_status}"
            if last != shown:  # say what the node answers while it is not yet what we wait for
                shown = last
                tell("waiting", last)
            pause = delays.pop(0) if delays else (self.wait_interval or step.interval)
            await asyncio.sleep(max(0.0, min(pause, deadline - time.monotonic())))

    # ---- stop, pivot, redeploy, reattach ------------------------------------------------------

    async def stop(self) -> int:
        """Remove this deployment's containers (by label) on every node; returns how many went."""
        if self.current.state != State.STOPPED:
            self._set(State.STOPPING, f"removing {self.name}'s containers")
        await self.close()
        with contextlib.suppress(Exception):  # only words for a launch watching elsewhere: never blocks a stop
            await stopmark.mark(self.cluster[self.config.head.name], self.name)
        removed, errors = await self._remove_all()
        if errors:
            self._set(State.FAILED, "could not remove every container: " + "; ".join(errors))
            raise DeployError("could not remove every container: " + "; ".join(errors))
        self._set(State.STOPPED, f"removed {removed} container(s)")
        return removed

    async def _remove_all(self, grace: int | None = None) -> tuple[int, list[str]]:
        grace = self.stop_grace if grace is None else grace
        results = await asyncio.gather(*(C.remove_on(n, self.name, grace) for n in self.cluster))
        return sum(k for k, _ in results), [f"{n.name}: {e}" for n, (_, e) in zip(self.cluster, results) if e]

    async def stop_for(self, reason: str) -> None:
        """Remove this deployment's containers on every node and leave it failed with `reason`: the memory
        guard's stop. No stop mark: nobody asked for it, and a watcher elsewhere should say failed, and why."""
        self._halted = reason
        self._set(State.STOPPING, f"{reason}; removing {self.name}'s containers")
        await self.close()
        removed, errors = await self._remove_all(grace=0)  # no grace: the host may wedge within seconds
        left = f"; could not remove every container: {'; '.join(errors)}" if errors else ""
        with contextlib.suppress(Exception):  # words for `status` elsewhere: never delays or blocks the stop
            await stopmark.mark_guarded(self.cluster[self.config.head.name], self.name, reason)
        self._set(State.FAILED, f"{reason}; stopped: removed {removed} container(s){left}")

    async def leftovers(self) -> list[tuple[str, str, str]]:
        """(node, container, state) of this deployment's containers still on the nodes: after a failed
        launch, what keeps running (a Ray head, a rank waiting for its peers) until it is stopped."""
        found = await self.existing()
        return [(f.node, c.name, c.state) for f in found.values() for c in f.containers]

    async def current_options(self) -> tuple[PlanOptions, Deployment | None]:
        """The options of the running (or last) launch: this process's, else the record on the head."""
        if self.current.options is not None:  # a launch's, or read from its record
            return copy.deepcopy(self.current.options), self.current
        try:
            rec = await load_record(self.cluster[self.config.head.name], self.name)
        except StateFileError as e:
            raise DeployError(e.line()) from None
        if rec is None:
            raise DeployError(
                f"no record of deployment {self.name} on {self.config.head.name} "
                f"(~/{STATE_DIR}/{self.name}.json): launch it first"
            )
        return copy.deepcopy(rec.options), rec

    async def plan_pivot(self, to: str | None = None) -> tuple[PlanOptions, Plan]:
        """The options and plan a pivot would launch (nothing stops yet): same model, TP/PP, nodes, network."""
        opts, rec = await self.current_options()
        engine = rec.engine if rec else opts.engine
        to = to or other_engine(engine)
        if to not in ENGINES:
            raise DeployError(f"unknown engine {to!r} (expected one of: {', '.join(ENGINES)})")
        new = pivot_options(opts, to, rec)
        plan = await self.planner(copy.deepcopy(new))
        plan.warnings[:0] = pivot_notes(opts, to)  # first, so every confirmation shows them
        return new, plan

    async def plan_redeploy(self) -> tuple[PlanOptions, Plan]:
        """The current options, re-planned (facts may have changed); nothing stops yet."""
        opts, _ = await self.current_options()
        return opts, await self.planner(copy.deepcopy(opts))

    async def relaunch(self, plan: Plan, opts: PlanOptions) -> None:
        """Stop this deployment, then launch `plan`; a plan with errors is refused before anything stops."""
        if not plan.ok:
            raise DeployError("the new plan has errors: " + "; ".join(plan.errors))
        await self.stop()
        await self.launch(plan, opts, if_exists="replace")

    async def pivot(self, to: str | None = None) -> Plan:
        """Stop, then launch the other engine with the same model, TP/PP, nodes and network."""
        opts, plan = await self.plan_pivot(to)
        await self.relaunch(plan, opts)
        return plan

    async def redeploy(self) -> Plan:
        """Stop, then launch again with the current options."""
        opts, plan = await self.plan_redeploy()
        await self.relaunch(plan, opts)
        return plan

    async def reattach(self) -> bool:
        """Rebuild the deployment from its container labels and resume logs and readiness."""
        await self.close()
        self._resumed = 0  # watching what runs is not a launch: a failure there is not a resume's
        found = await self.existing()
        ours = [(f.node, c) for f in found.values() for c in f.containers]
        if not ours:
            # nothing to watch; where it stood carries over to the _set below, as in _begin
            self.current = Deployment.empty(self.name).but(state=self.current.state, detail=self.current.detail)
            self._set(State.STOPPED, f"no containers of {self.name}")
            return False
        try:
            rec = await load_record(self.cluster[self.config.head.name], self.name)
        except StateFileError as e:  # the containers' labels are enough to follow them
            rec = None
            self.warnings.append(e.line())
        cur = self._from_labels(ours, rec)
        self._deadline = time.monotonic() + self.ready_timeout  # reattached: readiness counts from now
        await self._measure_offsets(sorted({n for n, _ in ours}))
        self._begin(cur)
        plans = sorted({L.plan_of(c.labels) for _, c in ours})
        if len(plans) > 1:
            self.warnings.append(f"containers of {self.name} come from different plans: {', '.join(plans)}")
        for n, c in ours:
            self._follow(n, c.name)
        running = [c for _, c in ours if c.state == "running"]
        self._set(State.STARTING, f"reattached to {len(running)} running container(s) of {len(ours)}")
        head_running = any(n == cur.head and c.state == "running" for n, c in ours)
        if head_running:
            self._spawn("ready", self._readiness(cur))
        return True

    def _from_labels(self, ours: list[tuple[str, Container]], rec: Deployment | None) -> Deployment:
        engines = sorted({c.labels.get(L.ENGINE, "") for _, c in ours} - {""})
        engine = rec.engine if rec and rec.engine in engines else (engines[0] if engines else DEFAULT_ENGINE)
        mine = [(n, c) for n, c in ours if c.labels.get(L.ENGINE) == engine] or ours
        head = min(mine, key=lambda nc: int(nc[1].labels.get(L.RANK, "0") or 0))[0]
        plan_id = next((c.labels.get(L.PLAN, "") for _, c in mine), "")
        if rec is not None and rec.engine == engine:
            mode, port, served, opts = rec.mode, rec.port, rec.served_model_name, rec.options
        else:  # no record: the engine's defaults are the best guess
            mode = default_mode(engine)
            port = self.config.port_for(engine)
            served, opts, rec = self.config.model.name, None, None
        containers = {n: c.name for n, c in mine}
        if rec is not None:  # the record's choices, with what the labels show now
            return rec.but(deployment=self.name, plan_id=plan_id, head=head, containers=containers)
        return Deployment(
            self.name,
            engine,
            mode,
            opts,
            plan_id=plan_id,
            port=port,
            served_model_name=served,
            containers=containers,
            head=head,
        )


_SEE_HELP = re.compile(r"^See '.*--help'\.?$")


def _problem_words(p: Problem) -> str:
    """The state's detail; the hint travels with the Problem event (and in problems of --json)."""
    where = f" on {p.node}" if p.node else ""
    return f"{problem_words(p.kind)}{where}: {p.message}"


def _last_line(text: str) -> str:
    """The error's own last words; docker's closing "See 'docker run --help'." says nothing."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not _SEE_HELP.match(ln.strip())]
    return lines[-1][:300] if lines else ""


def _name_conflict(detail: str) -> bool:
    low = detail.lower()
    return "conflict" in low and "already in use" in low


def _step_hint(step: Step, detail: str) -> str:
    low = detail.lower()
    if _name_conflict(detail):
        return (
            f"a container named {step.container} already exists on {step.node} and is not this deployment's "
            f"(sparktui removes only its own): remove or rename it there, or launch with another --deployment"
        )
    if "no such image" in low or "unable to find image" in low or "pull access denied" in low:
        return "the image is not on that node: `sparktui sync image` copies it from the head"
    if step.kind == "wait":
        return "the condition never came true: the node's log (sparktui logs) tells why"
    return "the command's own error is above; the journal (sparktui journal) has the exact line"
