"""Engine logs -> milestones (how far the start got) and problems (what went wrong, and what to do).

Pure: feed it lines as they arrive (`feed`), tell it the time now and then (`tick`) so silence
counts, and call `finish` when a log read from a file ends. Lines may carry docker's `-t`
timestamp; it is stripped and used as the line's time. The signatures themselves live in
engines/logsigns.py (the engine-neutral ones) and on each Engine (its own), put together by engines/logrules.py.

Two judgements matter most:
- silence inside distributed init is the cross-node hang (SGLang freezes after "Custom allreduce is
  disabled ..." when its message queue picked the wrong address); a file ending there is suspect too;
- a stack dump or an NCCL warning is only provisional: if the engine goes on loading or serving
  afterwards, it was harmless and the problem is withdrawn.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from ..engines import ENGINES, find_engine, label, logsigns as S
from .logevents import Event, Milestone, Problem, ProblemCleared, parse_docker_ts, strip_prefixes
from .diagnose_batch import BatchFeed
from .phases import DEFAULT_LIMITS, INIT_PHASES, PhaseTracker
from ..state.states import MilestoneKind as M, Phase, ProblemKind as PK, State
from ..state.words import phase_words

__all__ = ["Diagnoser", "Event", "Milestone", "Problem", "ProblemCleared", "parse_docker_ts", "strip_prefixes"]

MAX_MILESTONES = 500  # bounded memory on endless logs: later milestones are counted, not kept
MAX_PROBLEMS = 200
ABSENT_FACTOR = 10  # how much longer init may stay quiet while a node of the deployment has not started


class _Node:
    def __init__(self) -> None:
        self.lines = 0
        self.last_at: float | None = None
        self.dist: str | None = None  # None | "in" | "done"
        self.dist_line = 0
        self.dist_at: float | None = None  # when it began distributed init
        self.allreduce_off = False
        self.weights_pct: int | None = None
        self.seen: set = set()  # milestone keys already emitted
        self.tb: dict | None = None  # the traceback being read
        self.recent: tuple[set, int] = (set(), 0)  # problem kinds of the last traceback, and where it ended
        self.collective: Problem | None = None  # a collective timeout whose line was cut before naming the op
        self.waits = 0  # "waits for a worker" lines since the last request served (vLLM's shm_broadcast)


class Diagnoser(BatchFeed):
    """Feed lines; read .milestones, .problems, .state."""

    def __init__(
        self,
        engine: str,
        hang_after: float = 90.0,
        model_path: str | None = None,
        clock: Callable[[], float] = time.time,
        limits: dict[str, float | None] | None = None,
        expect: Iterable[str] = (),
        env_set: Iterable[str] = (),
        hang_fix: str = "",
    ):
        eng = find_engine(engine)
        if eng is None:
            raise ValueError(f"unknown engine {engine!r} (expected one of: {', '.join(ENGINES)})")
        self.engine = engine
        self.rules = eng.log_rules
        self.hang_after = hang_after
        # Silence allowed per phase; the init phases take hang_after (the rendezvous hang).
        self.limits = {**DEFAULT_LIMITS, **{p: hang_after for p in INIT_PHASES}, **(limits or {})}
        self.phases = PhaseTracker()
        self.expected = set(expect)  # nodes of the deployment: a rendezvous waits until each has started
        # variables the plan set on every node: a hint asking for them gives way to the next cause
        self.hang_hint = eng.hang_hint(frozenset(env_set))
        # what the plan knows better than the log: the rendezvous on a subnet that is not the fabric
        self.hang_fix = hang_fix
        if hang_fix:
            self.hang_hint = f"{hang_fix}. If that subnet is meant: {self.hang_hint}"
        self.dropped_milestones = 0
        self.model_path = model_path
        self.clock = clock
        self.milestones: list[Milestone] = []
        self.problems: list[Problem] = []  # active ones
        self.cleared: list[ProblemCleared] = []
        self.ready = False
        self._loading = False
        self._ray_local = False
        self._nodes: dict[str | None, _Node] = {}
        self._worker_waits = 0  # the head's shm_broadcast waits, every node
        self._semlock = False  # a worker lost its semaphore (SemLock._rebuild), on any node

    # ---- state ----------------------------------------------------------------------------

    @property
    def state(self) -> State:
        """One of states.FROM_LOGS: what the log alone tells."""
        # Only a suspicion (silence, a log that stops) is "hung"; a rendezvous that timed out has failed.
        # While serving, a doubt (a soft watchdog's stack dump, an NCCL warning) leaves the server ready.
        problems = [p for p in self.problems if not (p.provisional and p.kind in S.TRANSIENT)]
        if self.ready and all(p.provisional for p in problems):
            return State.WEDGED if any(p.kind == PK.WEDGED for p in problems) else State.READY
        if any(not (p.kind in S.SUSPECT and p.provisional) for p in problems):
            return State.FAILED
        if problems:
            return State.HUNG
        if self.ready:
            return State.READY
        return State.LOADING if self._loading else State.STARTING

    def to_json(self) -> dict:
        return {
            "engine": self.engine,
            "ready": self.state == State.READY,
            "state": self.state.value,
            "milestones": [m.to_json() for m in self.milestones],
            "problems": [p.to_json() for p in self.ordered_problems()],
            "nodes": self.phases.to_json(),
        }

    def ordered_problems(self) -> list[Problem]:
        """Causes first: failures, then suspicions, then provisional doubts; "the engine died" follows
        whatever killed it even when it was printed first, unless it names that cause itself."""

        def rank(p: Problem) -> int:
            if p.kind == PK.ENGINE_DIED:
                return 0 if p.cause else 3  # with its cause folded in, the death is the verdict
            return 0 if not p.provisional else 1 if p.kind in S.SUSPECT else 2

        return sorted(self.problems, key=rank)

    # ---- input ----------------------------------------------------------------------------

    def feed_lines(self, lines: Iterable[str], node: str | None = None) -> list[Event]:
        out: list[Event] = []
        for line in lines:
            out += self.feed(line, node)
        return out

    def feed(self, line: str, node: str | None = None, now: float | None = None) -> list[Event]:
        """One log line (a trailing newline is fine; `\\r`-separated progress updates are read in turn)."""
        ns = self._nodes.setdefault(node, _Node())
        ns.lines += 1
        at, text = parse_docker_ts(line.rstrip("\r\n"))
        if at is None:
            at = now  # reported time: None for a plain file read
        t = at if at is not None else self.clock()  # silence is measured on this
        out: list[Event] = []
        if ns.last_at is not None:
            out += self._silence(ns, node, t, ns.lines - 1)
        ns.last_at = t
        self.phases.line(text, node, ns.lines)
        for seg in text.split("\r"):
            if seg.strip():
                out += self._segment(ns, node, seg, at)
        return out

    @property
    def quiet_serving(self) -> bool:
        """Serving with nothing in doubt: a serving line would change nothing but the count."""
        return (
            self.ready
            and not self.problems
            and self.phases.node_phase(None) == Phase.FIRST_REQUEST
            and all(ns.dist != "in" and ns.tb is None and not ns.waits for ns in self._nodes.values())
        )

    def skip(self, count: int, last_line: str, node: str | None = None) -> None:
        """`count` serving lines read while quiet_serving (the last one given): count them only."""
        ns = self._nodes.setdefault(node, _Node())
        ns.lines += count
        at, text = parse_docker_ts(last_line.rstrip("\r\n"))
        if at is not None:
            ns.last_at = at
        pn = self.phases.nodes.get(node)
        if pn is not None:
            pn.lines, pn.last_text = ns.lines, text.strip()[:300] or pn.last_text

    def tick(self, now: float | None = None) -> list[Event]:
        """Silence check: a node quiet for hang_after seconds inside distributed init is hung."""
        now = self.clock() if now is None else now
        out: list[Event] = []
        for node, ns in self._nodes.items():
            if ns.last_at is None:
                continue
            if ns.tb is not None and ns.tb["ended"] and now - ns.last_at >= 1.0:
                out += self._flush_tb(ns, node)
            out += self._silence(ns, node, now, ns.lines)
        return out

    def _silence(self, ns: _Node, node, now: float, line: int) -> list[Event]:
        """Silence since a node's last line, against the limit of the phase it is in."""
        quiet = now - ns.last_at
        # Every rank waits in the rendezvous until the last one arrives: silence in init counts from
        # when every node of the deployment began distributed init; until then waiting is normal
        # (up to ABSENT_FACTOR x hang_after, in case a node never gets there).
        init_quiet, init_limit = quiet, self.hang_after
        if self.expected:
            began = [self._nodes[n].dist_at for n in self.expected if n in self._nodes]
            if len(began) == len(self.expected) and None not in began:
                init_quiet = min(quiet, now - max(began))
            else:
                init_limit = self.hang_after * ABSENT_FACTOR
        if ns.dist == "in":
            return (
                self._hang(ns, node, f"no output for {quiet:.0f} s", line, ns.last_at)
                if init_quiet >= init_limit
                else []
            )
        phase = self.phases.node_phase(node)
        if phase in INIT_PHASES and ns.dist == "done" and not self.phases.nccl_open(node):
            phase = Phase.WEIGHTS  # init is over: what comes next is loading, with its own (longer) limit
        limit = self.limits.get(phase) if phase else None
        if phase in INIT_PHASES:
            limit = init_limit
        if phase in INIT_PHASES:
            quiet = init_quiet
        if limit is None or quiet < limit or self.ready:
            return []
        if phase in INIT_PHASES:
            return self._hang(ns, node, f"no output for {quiet:.0f} s in {phase_words(phase)}", line, ns.last_at)
        if any(p.kind == PK.STALLED and p.node == node for p in self.problems):
            return []
        where = f" on {node}" if node else ""
        return self._problem(
            Problem(
                PK.STALLED,
                line,
                f"no output for {quiet:.0f} s during {phase_words(phase)}{where}",
                S.STALL_HINT.get(phase, S.TRACEBACK_HINT),
                node,
                ns.last_at,
                provisional=True,
                phase=phase,
            )
        )

    def finish(self) -> list[Event]:
        """The log ended (a file read to its end): settle what was pending."""
        out: list[Event] = []
        for node, ns in self._nodes.items():
            if ns.tb is not None:
                out += self._flush_tb(ns, node)
        return out + self._stopped()

    def _stopped(self) -> list[Event]:
        """A log that ends before serving, with nothing fatal to explain it: name where it stopped."""
        if self.ready or self.problems:
            return []  # a failure, a doubt or a proven silence already says more than where it ended
        v = self.phases.verdict()
        if v is None or v[0] == Phase.FIRST_REQUEST:
            return []
        phase, rank, node = v
        ns = self.phases.nodes[node]
        who = f" on rank {rank}" if rank is not None else ""
        who += f" ({node})" if node else ""
        rs = ns.ranks.get(rank)
        if phase == Phase.NCCL_INIT and rs is not None and not rs.nccl_open:
            msg = f"stopped after NCCL communicator init{who}, before weight loading"
        else:
            msg = f"stopped during {phase_words(phase)}{who}"
        if phase in INIT_PHASES:
            msg += " — if the log is no longer growing, this is a rendezvous hang"
            hint = self.hang_hint
        else:
            msg += " — if the log is no longer growing, it is stuck there"
            hint = S.STALL_HINT.get(phase, S.TRACEBACK_HINT)
        n = self._nodes.get(node)
        if ns is not None and n is not None and n.allreduce_off and phase in INIT_PHASES:
            msg += " (after 'Custom allreduce is disabled because this process group spans across nodes.')"
        return self._problem(
            Problem(
                PK.STOPPED,
                ns.lines,
                msg,
                hint,
                node,
                n.last_at if n else None,
                ns.last_text,
                provisional=True,
                phase=phase,
                rank=rank,
            )
        )

    # ---- one piece of a line ------------------------------------------------------------------

    def _segment(self, ns: _Node, node: str | None, seg: str, at: float) -> list[Event]:
        out: list[Event] = []
        n = ns.lines
        if "started" not in ns.seen:
            ns.seen.add("started")
            out.append(self._milestone(M.CONTAINER_STARTED, n, node, at, seg))
        out += self._traceback(ns, node, seg, at)
        out += self._progress(ns, node, seg, at)
        out += self._problems(ns, node, seg, at)
        return out

    def _traceback(self, ns: _Node, node, seg: str, at: float) -> list[Event]:
        out: list[Event] = []
        tb = ns.tb
        body = strip_prefixes(seg)
        if tb is not None and tb["ended"]:
            if body[:1].isspace():
                return out  # the exception's message goes on (pydantic errors put the cause here)
            if S.CHAINED.search(body):
                tb["chained"] = True
                return out
            if S.TRACEBACK.search(body) and tb["chained"]:
                tb.update(ended=False, chained=False)  # the same failure, told again one level up
                return out
            out += self._flush_tb(ns, node)
            tb = None
        if tb is None and (S.TRACEBACK.search(body) or S.FRAME.match(body)):
            ns.tb = {
                "line": ns.lines,
                "at": at,
                "classified": False,
                "ended": False,
                "chained": False,
                "msg": None,
                "kinds": set(),
            }
        elif tb is not None and not tb["ended"] and S.EXCEPTION_LINE.match(body):
            tb.update(ended=True, msg=body.strip())
        return out

    def _flush_tb(self, ns: _Node, node) -> list[Event]:
        tb, ns.tb = ns.tb, None
        if tb is not None:
            ns.recent = (tb["kinds"], ns.lines)
        if tb is None or tb["classified"]:
            return []
        msg = tb["msg"] or "a Python traceback (cut off)"
        if self._echo_of_death(msg):
            return []
        return self._problem(
            Problem(PK.TRACEBACK, tb["line"], msg[:300], S.TRACEBACK_HINT, node, tb["at"], msg, provisional=True)
        )

    def _progress(self, ns: _Node, node, seg: str, at: float) -> list[Event]:
        out: list[Event] = []
        n = ns.lines
        rules = self.rules
        if rules.dist_begin is not None and rules.dist_begin.search(seg) and ns.dist != "in":
            ns.dist, ns.dist_line = "in", n
            ns.dist_at = at if at is not None else ns.last_at
            out.append(self._milestone(M.DIST_INIT_BEGIN, n, node, at, seg))
        if S.CUSTOM_ALLREDUCE_OFF.search(seg):
            ns.allreduce_off = True
        if rules.dist_end is not None and rules.dist_end.search(seg):
            out += self._advance(ns, node, n, at, seg, M.DIST_INIT_END)
        for kind, sign in ((M.RAY_STARTED, S.RAY_STARTED), (M.RAY_CONNECTED, S.RAY_CONNECTED)):
            if sign.search(seg):
                joined = self._once(ns, kind, n, node, at, seg)
                # this node's Ray reached the GCS after all: its "cannot reach the GCS yet" is over
                out += joined + (self._withdraw(node, "Ray joined the cluster") if joined else [])
        if S.RAY_LOCAL.search(seg):
            self._ray_local = True
        m = S.WEIGHTS_PERCENT.search(seg)
        if m:
            out += self._weights(ns, node, n, at, seg, int(m[1]), {"done": int(m[2]), "total": int(m[3])})
        elif S.WEIGHTS_BEGIN.search(seg) and ns.weights_pct is None:
            out += self._weights(ns, node, n, at, seg, 0, {})
        elif S.WEIGHTS_END.search(seg):
            out += self._weights(ns, node, n, at, seg, 100, {})
        if S.SLOW_LOAD.search(seg):
            out += self._once(ns, M.SLOW_LOAD, n, node, at, seg)
        m = S.KV_SGLANG.search(seg)
        if m:
            out += self._advance(
                ns, node, n, at, seg, M.KV_CACHE, {"tokens": int(m[1]), "size_gb": round(float(m[2]) + float(m[3]), 2)}
            )
        m = S.KV_SGLANG_MLA.search(seg)
        if m:
            out += self._advance(ns, node, n, at, seg, M.KV_CACHE, {"tokens": int(m[1]), "size_gb": float(m[2])})
        m = S.KV_TOKENS.search(seg)
        if m:
            out += self._advance(ns, node, n, at, seg, M.KV_CACHE, {"tokens": int(m[1].replace(",", ""))})
        m = S.KV_MEMORY.search(seg)
        if m:
            out += self._advance(ns, node, n, at, seg, M.KV_CACHE, {"size_gib": float(m[1])})
        m = S.GRAPH_END.search(seg)
        if m:
            secs = m[1] or m[2]
            out += self._advance(ns, node, n, at, seg, M.CUDA_GRAPH, {"phase": "end", "seconds": float(secs)})
        elif S.GRAPH_BEGIN.search(seg) and (M.CUDA_GRAPH, "begin") not in ns.seen:
            ns.seen.add((M.CUDA_GRAPH, "begin"))
            out += self._advance(ns, node, n, at, seg, M.CUDA_GRAPH, {"phase": "begin"})
        out += self._transport(ns, node, n, at, seg)
        if rules.ready.search(seg) and not self.ready:
            self.ready = True
            out += self._advance(ns, node, n, at, seg, M.READY)
        if S.SERVING.search(seg):
            if not self.ready and ("/v1/" in seg or "Avg prompt throughput" in seg or "Decode batch" in seg):
                self.ready = True
                out.append(self._milestone(M.READY, n, node, at, seg, {"from": "requests"}))
            if S.PROGRESS.search(seg):
                for each in self._nodes.values():
                    each.waits = 0
                out += self._withdraw(None, "the server went on serving requests")
            else:  # an answer, no proof of tokens: /health and /v1/models answer while a rank is frozen
                out += self._withdraw(None, "the server went on answering", keep=self._worker_wait)
        return out

    @staticmethod
    def _worker_wait(p: Problem) -> bool:
        """A doubt only tokens produced can lift: the engine waiting for a worker (or wedged behind one)."""
        return p.kind == PK.WEDGED or (p.kind == PK.STALLED and S.WORKER_WAIT in p.text)

    def _transport(self, ns: _Node, node, n: int, at: float, seg: str) -> list[Event]:
        if ("transport", "gloo") in ns.seen:
            return []  # gloo carries this rank's collectives: no NCCL line may claim them
        if S.GLOO_BACKEND.search(seg):
            ns.seen.add(("transport", "gloo"))
            return [self._milestone(M.TRANSPORT, n, node, at, seg, {"transport": "gloo", "backend": "gloo"})]
        m = S.NCCL_RDMA.search(seg)
        if m and ("transport", "rdma") not in ns.seen:
            ns.seen.add(("transport", "rdma"))
            data = {"transport": "rdma"}
            if m.group(1):
                data.update(device=m.group(1), link=m.group(2))
            return [self._milestone(M.TRANSPORT, n, node, at, seg, data)]
        m = S.NCCL_SOCKET.search(seg)
        if m and not ns.seen & {("transport", "rdma"), ("transport", "socket")}:
            ns.seen.add(("transport", "socket"))
            data = {"transport": "socket"}
            if m.group(1):
                data["iface"] = m.group(1)
            return [self._milestone(M.TRANSPORT, n, node, at, seg, data)]
        return []

    def _weights(self, ns: _Node, node, n: int, at: float, seg: str, pct: int, extra: dict) -> list[Event]:
        if pct == ns.weights_pct:
            return []
        ns.weights_pct = pct
        return self._advance(ns, node, n, at, seg, M.WEIGHTS_LOADING, {"percent": pct, **extra})

    def _once(self, ns: _Node, kind: M, n: int, node, at: float, seg: str) -> list[Event]:
        if kind in ns.seen:
            return []
        ns.seen.add(kind)
        return [self._milestone(kind, n, node, at, seg)]

    def _advance(self, ns: _Node, node, n: int, at: float, seg: str, kind: M, data: dict | None = None) -> list[Event]:
        """A step past distributed init: it closes init if still open and proves earlier doubts wrong."""
        data = data or {}
        out: list[Event] = []
        if ns.dist == "in":
            ns.dist = "done"
            out.append(
                self._milestone(
                    M.DIST_INIT_END, n, node, at, seg, {} if kind == M.DIST_INIT_END else {"implied_by": kind}
                )
            )
        elif kind == M.DIST_INIT_END:
            return out
        if kind != M.DIST_INIT_END:
            key = (kind, tuple(sorted(data.items())))
            if key not in ns.seen:
                ns.seen.add(key)
                out.append(self._milestone(kind, n, node, at, seg, data))
        if kind != M.CONTAINER_STARTED:
            self._loading = True
        out += self._withdraw(node, f"{node or 'the engine'} went on ({kind})")
        return out

    def _milestone(self, kind: M, n: int, node, at: float, seg: str, data: dict | None = None) -> Milestone:
        m = Milestone(kind, n, node, at, dict(data or {}), seg.strip()[:300])
        if len(self.milestones) < MAX_MILESTONES:
            self.milestones.append(m)
        else:
            self.dropped_milestones += 1
        return m

    # ---- problems ---------------------------------------------------------------------------

    def _problems(self, ns: _Node, node, seg: str, at: float) -> list[Event]:
        n = ns.lines
        if ns.collective is not None:  # a page that hard-wrapped the line: the op is on the next one
            p, ns.collective = ns.collective, None
            m = S.COLLECTIVE.search(seg)
            if m:
                p.message = self._collective_words(p.rank, m, p.message.endswith(" while serving"))
        body = strip_prefixes(seg).strip()
        if S.IGNORE.search(seg):
            return []
        if self.model_path and "No such file or directory" in seg and self.model_path in seg:
            return self._classified(
                ns,
                Problem(
                    PK.MODEL_NOT_FOUND,
                    n,
                    f"{self.model_path} is missing in the container",
                    S.MODEL_HINT,
                    node,
                    at,
                    body,
                ),
            )
        if S.WORKER_WAIT in seg:
            self._worker_waits += 1
            if self._semlock:  # the head waits for the worker that lost its semaphore: the trap, not a wedge
                return self._trap(node, n, at, body)
        for sign in self.rules.signs:
            m = sign.pattern.search(seg)
            if not m:
                continue
            groups = [g if g is not None else "?" for g in m.groups()]
            message = sign.message.format(*groups) if sign.message else body[:300]
            hint = self.hang_hint if sign.rendezvous else sign.hint
            if sign.kind == PK.RAY_RESOURCES and self._ray_local:
                # the engine whose log this is runs Ray: name it as its users write it
                hint = (
                    f"{label(self.engine)} started its own Ray instead of joining the cluster: run it inside "
                    "the head container with RAY_ADDRESS=HEAD_IP:RAY_PORT (sparktui plans do)"
                )
            if sign.kind == PK.BAD_ARGUMENTS and (eng := find_engine(self.engine)) is not None:
                hint = eng.bad_arguments_hint(seg) or hint
            if sign.kind == PK.WATCHDOG_TIMEOUT and ns.dist == "in":
                message += " during distributed init"
                hint = self.hang_hint
            if sign.kind == PK.STALLED and self.ready and S.WORKER_WAIT in seg:
                ns.waits += 1
                if ns.waits >= 2:  # once can be a slow step; again with nothing served between is a wedge
                    return self._wedged(node, n, at, ns.waits * int(groups[0] or 60), body)
            p = Problem(sign.kind, n, message, hint, node, at, body[:300], sign.provisional)
            if sign.kind == PK.SEMAPHORE_LOST:
                self._semlock = True
                if self._worker_waits:
                    if ns.tb is not None:
                        ns.tb["classified"] = True  # the traceback is this trap's
                    return self._trap(node, n, at, body)
            if sign.kind == PK.WATCHDOG_TIMEOUT and "collective" in message and not self._collective(ns, p, seg):
                return []  # every rank reports the same timed-out collective: the first one names it
            if self.ready and not p.provisional:
                p.phase = Phase.FIRST_REQUEST  # it broke while serving, not while starting
                p.message += " while serving"
            if sign.kind == PK.ENGINE_DIED:
                if any(q.kind == PK.ENGINE_DIED and q.cause for q in self.problems):
                    if ns.tb is not None:
                        ns.tb["classified"] = True
                    return []  # the death already named with its cause, told again on the way down
                return self._fold_cause(p, self._classified(ns, p))
            return self._classified(ns, p)
        return []

    def _fold_cause(self, died: Problem, events: list[Event]) -> list[Event]:
        """The engine died after an error nothing else named: that error was no harmless doubt but the cause,
        and the death says so in its own words. Before ready that error stays the verdict (a start-up that
        crashed, with its exception). While serving the death is the verdict (vLLM: a worker's RuntimeError in
        execute_model, then "Worker proc ... died" or EngineDeadError): it names the first error printed and
        replaces its traceback and the later ones quoting it (the engine core's "Worker failed with error")."""
        if died not in self.problems:
            return events
        tbs = [q for q in self.problems if q.kind == PK.TRACEBACK and q.provisional]
        if not tbs:
            return events
        cause = tbs[0]
        died.message += f": {cause.message}"
        died.hint = S.DIED_OF_HINT
        if died.phase != Phase.FIRST_REQUEST:
            cause.provisional = False
            cause.phase = died.phase
            return events
        words = cause.message.split(": ", 1)[-1]  # the error's own words, without its exception class
        out: list[Event] = []
        for q in tbs:
            if q is cause or words in q.message:
                self.problems.remove(q)
                out.append(ProblemCleared(q, "it killed the engine: named in the engine's death"))
        died.cause = cause.text or cause.message
        return out + events

    def _echo_of_death(self, msg: str) -> bool:
        """A traceback quoting the error an engine death already names (printed after the death)."""
        for q in self.problems:
            if q.kind == PK.ENGINE_DIED and q.cause:
                words = q.cause.split(": ", 1)[-1]
                if words and words in msg:
                    return True
        return False

    def _trap(self, node, n: int, at: float, body: str) -> list[Event]:
        """A worker's lost semaphore and the head's wait for workers, on any nodes: the semaphore trap. It
        replaces the lost semaphore's own problem and the wait's stall or wedge, which it explains."""
        if any(q.kind == PK.SEMAPHORE_TRAP for q in self.problems):
            return []
        out: list[Event] = []
        for q in [q for q in self.problems if q.kind in (PK.SEMAPHORE_LOST, PK.STALLED, PK.WEDGED)]:
            self.problems.remove(q)
            out.append(
                ProblemCleared(q, "a worker lost its semaphore while the engine waits for it: the semaphore trap")
            )
        return out + self._problem(
            Problem(PK.SEMAPHORE_TRAP, n, S.SEMAPHORE_TRAP_MESSAGE, S.SEMAPHORE_HINT, node, at, body[:300])
        )

    def _wedged(self, node, n: int, at: float, waited: int, body: str) -> list[Event]:
        """The wedge replaces the first wait's doubt on that node: it is the same stall, now proven."""
        out: list[Event] = []
        for q in [q for q in self.problems if q.kind == PK.STALLED and q.node == node]:
            self.problems.remove(q)
            out.append(ProblemCleared(q, "the wait repeated: a wedge"))
        return out + self._problem(
            Problem(
                PK.WEDGED,
                n,
                S.WEDGED_MESSAGE.format(waited),
                S.WEDGED_HINT,
                node,
                at,
                body[:300],
                provisional=True,
                phase=Phase.FIRST_REQUEST,
            )
        )

    def _collective(self, ns: _Node, p: Problem, seg: str) -> bool:
        """Name the collective that timed out, and the rank; False when one is already reported on that node."""
        if any(q.kind == p.kind and q.node == p.node and q.rank is not None for q in self.problems):
            return False
        p.rank = self.phases.rank_of(seg)
        m = S.COLLECTIVE.search(seg)
        p.message = self._collective_words(p.rank, m, False)
        if m is None and "WorkNCCL(" in seg:
            ns.collective = p
        return True

    @staticmethod
    def _collective_words(rank: int | None, m, serving: bool) -> str:
        op = m[1].strip("_") if m else "collective"
        within = f" within {int(m[2]) / 1000:g} s" if m else ""
        on = f" on rank {rank}" if rank is not None else ""
        return f"collective timeout{on}: an NCCL {op} did not finish{within} (torch NCCL watchdog)" + (
            " while serving" if serving else ""
        )

    def _classified(self, ns: _Node, p: Problem) -> list[Event]:
        if ns.tb is not None:
            ns.tb["classified"] = True
            if p.kind in ns.tb["kinds"]:
                return []  # the same failure restated further down one traceback
            ns.tb["kinds"].add(p.kind)
        elif p.kind in ns.recent[0] and p.line - ns.recent[1] <= 3:
            return []  # ... or in the lines just after it (NCCL's "Last error:" block)
        return self._problem(p)

    def _problem(self, p: Problem) -> list[Event]:
        for q in self.problems:
            if (q.kind, q.node, q.message) == (p.kind, p.node, p.message):
                return []  # every rank prints the same failure
        if len(self.problems) >= MAX_PROBLEMS:
            return []
        if p.kind == PK.RENDEZVOUS_HANG and self.hang_fix and self.hang_fix not in p.hint:
            p.hint = f"{self.hang_fix}. {p.hint}"
        self.problems.append(p)
        return [p]

    def _hang(self, ns: _Node, node, why: str, line: int, at: float | None) -> list[Event]:
        if any(p.kind == PK.RENDEZVOUS_HANG and p.node == node for p in self.problems):
            return []
        where = f" on {node}" if node else ""
        msg = f"distributed init stalled{where}: {why}"
        if ns.allreduce_off:
            msg += " after 'Custom allreduce is disabled because this process group spans across nodes.'"
        # Provisional: silence is a suspicion, and a late "init ends" proves it wrong. The phase and
        # rank are the ones `diagnose` names for a saved log that stops here.
        lag = self.phases.laggard(node) or (None, None, None)
        return self._problem(
            Problem(
                PK.RENDEZVOUS_HANG,
                line,
                msg,
                self.hang_hint,
                node,
                at,
                provisional=True,
                phase=lag[0] if lag[0] in INIT_PHASES else Phase.DIST_INIT,
                rank=lag[1],
            )
        )

    def _withdraw(self, node, reason: str, keep: Callable[[Problem], bool] | None = None) -> list[Event]:
        """Progress on node (None: anywhere) clears its provisional problems and suspected hangs (but those
        `keep` holds to)."""
        out: list[Event] = []
        for p in list(self.problems):
            if p.provisional and (node is None or p.node == node) and not (keep and keep(p)):
                self.problems.remove(p)
                c = ProblemCleared(p, reason)
                if len(self.cleared) < MAX_PROBLEMS:
                    self.cleared.append(c)
                out.append(c)
        return out
