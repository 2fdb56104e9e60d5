"""Per-node results of the rendezvous check and the overall verdict: what failed, where, and what to try.

Pure: results come in as the check program's JSON (or as a failure seen before it ran), reasons and
fixes are plain sentences built from the error kind and the plan's addresses.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field

from .check_program import classify
from ..state.states import CheckKind as C
from ..state.words import check_words
from ..engines import DEFAULT_ENGINE, find_engine, get_engine
from ..plan.fit import gib
from ..nodes.facts import Memory
from ..memory.free import FreeMemory, measure
from ..network.paths import describe_paths
from . import rate
from .ipc import IpcRisk
from .leftovers import Leftovers
from .halves import HalfResult
from .rails import RailResult, links_short
from .transit import Problem

# Root causes first, as CheckKind lists them: the failure the verdict names. Waiting for a peer that never
# came (peer_missing) or losing one (peer_failed) is what the other ranks see of someone else's failure.
ROOT_ORDER = tuple(C)
SECONDARY = (
    C.PEER_LATE,
    C.PEER_MISSING,
    C.PEER_FAILED,
    C.STOPPED,
    C.SKIPPED,
)  # never a reason to stop the others early
# Failures of the node itself: whatever its peers do, they stand (the others may be stopped at once).
LOCAL = (
    C.SSH,
    C.IMAGE_MISSING,
    C.PYTHON_MISSING,
    C.DOCKER,
    C.NOT_STARTED,
    C.INTERFACE_MISSING,
    C.ADDRESS_MISSING,
    C.PORT_IN_USE,
    C.GPU,
)
_TARGET = (re.compile(r"\(([0-9A-Fa-f.:]+), (\d+)\)"), re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){3}):(\d+)\b"))


def _member(word: object) -> C | None:
    """The kind the check program named, as its member; None for no word or one no kind has."""
    try:
        return C(word) if word else None
    except ValueError:
        return None


def classified(text: str) -> tuple[C | None, str | None]:
    """classify() with its kind as a member: the check program, stdlib only in any image, names words."""
    kind, line = classify(text)
    return _member(kind), line


@dataclass
class Setting:
    """What the check ran against, for sentences that name addresses and alternatives."""

    addr: str
    port: int
    subnet: str | None
    image: str
    timeout: float
    start_window: float = 300.0  # how long each node's check container had to start
    engine: str = DEFAULT_ENGINE
    head: str = ""
    alternatives: list[str] = field(default_factory=list)  # other subnets joining all nodes, best first
    ranks: dict[int, str] = field(default_factory=dict)  # rank -> node name
    fabric: dict = field(default_factory=dict)  # the plan's fabric summary: line rate, halves, MTU

    @property
    def host_var(self) -> str:
        e = find_engine(self.engine) or get_engine(DEFAULT_ENGINE)
        return e.host_ip_env or "the rendezvous address"

    def other_subnet(self) -> str:
        if self.alternatives:
            return f"pick another subnet joining all nodes: --iface {self.alternatives[0]}"
        return "pick another subnet joining all nodes with --iface (`sparktui check` lists them)"


@dataclass
class NodeResult:
    """One node's part of the check."""

    node: str
    rank: int
    iface: str | None = None
    ip: str | None = None
    ok: bool = False
    path: str | None = None  # nccl (torch + GPU in the image) | tcp (plain sockets)
    transport: str | None = None  # rdma | socket | p2p | shm | tcp: the data path
    net: str | None = None  # the network NCCL set up: rdma | socket
    transport_line: str | None = None  # the NCCL line that says so
    bandwidth_gb_s: float | None = None
    bandwidth_what: str | None = None  # "all-reduce bus bandwidth" | "TCP stream"
    nccl: str | None = None  # the NCCL release the image's torch loads (torch.cuda.nccl.version())
    kind: C | None = None  # what it failed of (see ROOT_ORDER)
    reason: str | None = None  # a sentence naming what failed
    fix: str | None = None  # what to try
    error: str | None = None  # the error text as seen
    line: str | None = None  # the output line that told the kind
    target: str | None = None  # address:port that could not be reached
    stage: str | None = None  # where the check was when it ended
    seconds: float | None = None
    start_seconds: float | None = None  # from `docker run` to the check program's first line
    timings: dict[str, float] = field(default_factory=dict)
    nccl_lines: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)  # last output lines of a failed check
    notes: list[str] = field(default_factory=list)
    memory: FreeMemory | None = None  # free memory read at the check (unified memory only)
    ipc: IpcRisk | None = None  # whether logind can remove the engine's IPC objects (the semaphore trap)

    def __post_init__(self) -> None:
        if self.kind is not None:
            self.kind = C(self.kind)  # a word that names no kind fails here, not in a compare that never matches

    @classmethod
    def from_check(cls, node: str, rank: int, iface: str | None, ip: str | None, data: dict) -> "NodeResult":
        """From the check program's result line."""
        r = cls(node=node, rank=rank, iface=iface, ip=ip, ok=bool(data.get("ok")))
        for k in (
            "path",
            "transport",
            "net",
            "transport_line",
            "bandwidth_gb_s",
            "bandwidth_what",
            "nccl",
            "error",
            "line",
            "target",
            "stage",
            "seconds",
        ):
            if data.get(k) is not None:
                setattr(r, k, data[k])
        r.timings = dict(data.get("timings") or {})
        r.nccl_lines = [str(x) for x in data.get("nccl_lines") or []]
        r.tail = [str(x) for x in data.get("tail") or []]
        if data.get("note"):
            r.notes.append(str(data["note"]))
        if not r.ok:
            r.kind = _member(data.get("kind"))
            if r.kind in (None, C.UNKNOWN):
                r.kind, r.line = classified("\n".join([r.error or ""] + r.tail))
                r.kind = r.kind or C.UNKNOWN
        return r

    @classmethod
    def failed(
        cls, node: str, rank: int, iface: str | None, ip: str | None, kind: C | None, error: str, text: str = ""
    ) -> "NodeResult":
        """A failure seen outside the check program (SSH, docker, the checks before it)."""
        line = None
        if kind is None:
            kind, line = classified("\n".join([error, text]))
        tail = [x for x in text.splitlines() if x.strip()][-25:]
        return cls(
            node=node,
            rank=rank,
            iface=iface,
            ip=ip,
            ok=False,
            kind=kind or C.UNKNOWN,
            error=error,
            line=line,
            tail=tail,
        )

    def to_json(self) -> dict:
        out = asdict(self)
        out["memory"] = self.memory.to_json() if self.memory else None
        out["ipc"] = self.ipc.to_json() if self.ipc else None
        return out


def _target(r: NodeResult, s: Setting) -> str:
    if r.target:
        return r.target
    for rx in _TARGET:
        m = rx.search("\n".join(x for x in (r.line, r.error) if x))
        if m:
            return f"{m[1]}:{m[2]}"
    return f"{s.addr}:{s.port}"


def explain(r: NodeResult, s: Setting, rdma: str | None = None) -> tuple[str, str]:
    """(reason, fix) for a failed node."""
    kind, n = r.kind, r.node
    said = r.line or r.error or ""
    if kind == C.SSH:
        return (
            f"{n} could not be reached over SSH: {r.error}",
            "run `sparktui check` and fix the node's SSH access first",
        )
    if kind == C.IMAGE_MISSING:
        return f"image {s.image} is not on {n}", (
            f"copy it with `sparktui sync image {shlex.quote(s.image)} --to {n}` (or `docker load` it there)"
        )
    if kind == C.PYTHON_MISSING:
        return f"image {s.image} has no python3 to run the check on {n}", "use the engine's image (it ships python3)"
    if kind == C.DOCKER:
        fix = (
            "the NVIDIA container runtime is missing or docker.gpu_style does not match it "
            "(gpus-all, runtime-nvidia, cdi)"
            if "device driver" in said
            else "fix docker on the node; see its message"
        )
        return f"docker could not start the check on {n}: {said}", fix
    if kind == C.NOT_STARTED:
        last = f" (its last words: {r.tail[-1]})" if r.tail else ""
        return (
            f"the container did not start within {s.start_window:g} s on {n}: docker ran no program in "
            f"{s.image} yet{last}",
            f"time `docker run --rm {s.image} true` on {n}: load the image there first (`sparktui sync image`) "
            "rather than pulling it at start, check docker's storage driver and disk (`docker info`), "
            "or give it longer (--start-window)",
        )
    if kind == C.PEER_LATE:
        return f"{n}: {r.error}", "run the preflight again (the image now starts faster) or raise --timeout"
    if kind == C.INTERFACE_MISSING:
        return (
            f"{n} lacks the interface the plan names ({said})",
            f"{s.other_subnet()}, or correct nodes[{n}].interfaces / NCCL_SOCKET_IFNAME",
        )
    if kind == C.ADDRESS_MISSING:
        return (
            f"{n}: {said}",
            f"run `sparktui check` to refresh {n}'s addresses; {s.host_var} must be {n}'s own address"
            + (f" on {s.subnet}" if s.subnet else "")
            + (f" ({r.ip})" if r.ip else ""),
        )
    if kind == C.PORT_IN_USE:
        return f"{n}: the check's port is taken ({said})", "pass --dist-port with a free port, or stop what holds it"
    if kind == C.UNREACHABLE:
        where = f" on {r.iface}" if r.iface else ""
        return (
            f"{_target(r, s)} is unreachable from {n} ({said})",
            f"check the link{where} (cable, `ip link`, a firewall), or {s.other_subnet()}",
        )
    if kind == C.REFUSED:
        return (
            f"nothing listened at {_target(r, s)} when {n} called ({said})",
            f"see why the head ({s.head}) did not listen there; is {_target(r, s)} the head's address?",
        )
    if kind == C.RDMA:
        dev = f"NCCL_IB_HCA={rdma}" if rdma else "NCCL_IB_HCA"
        return (
            f"NCCL's RDMA path failed on {n}: {said}",
            f"check {dev} against `ibdev2netdev` and /dev/infiniband on {n}; "
            "--env NCCL_IB_DISABLE=1 runs NCCL over sockets to confirm the rest works",
        )
    if kind == C.GPU:
        return (
            f"the check on {n} found no usable GPU: {said}",
            "check docker.gpu_style (gpus-all, runtime-nvidia, cdi) and `nvidia-smi` on the node",
        )
    if kind == C.NCCL:
        return f"NCCL failed on {n}: {said}", "read the NCCL lines of this node (NCCL_DEBUG=INFO is on)"
    if kind == C.TIMEOUT:
        stuck = f" (stuck in {r.stage})" if r.stage else ""
        if r.stage in ("all-reduce", "bandwidth"):
            fix = (
                "NCCL joined but no data flows: check the RDMA device"
                + (f" {rdma}" if rdma else "")
                + " or try --env NCCL_IB_DISABLE=1"
            )
        else:
            fix = s.other_subnet()
        return f"{n} got no answer within {s.timeout:g} s{stuck}", fix
    if kind == C.MEMORY and r.memory is not None:
        return f"{n}: {_memory_reason(r.memory)}", r.memory.fix()
    if kind == C.IPC and r.ipc is not None:
        return f"{n}: {r.ipc.why}", r.ipc.fix
    if kind == C.PEER_MISSING:
        return f"{n} waited for ranks that never came ({said})", "see the nodes that did not join"
    if kind == C.PEER_FAILED:
        return f"{n} lost a peer ({said})", "see the other nodes' reasons"
    if kind == C.STOPPED:
        return f"{n} was stopped after another node failed", "see the failing node"
    if kind == C.SKIPPED:
        return f"{n} was not started: another node failed its checks first", "see the failing node"
    return f"{n}: {r.error or 'the check failed'}", "see the output lines of this node"


def judge_late_peers(results: dict[str, NodeResult], ran: dict[str, tuple[float, float]]) -> None:
    """A rank whose rendezvous failed while a peer's container had not started yet (or started only
    after this rank's check was over) never had anyone to meet: that is the peer's slow start, not the
    network. ran: node -> (when its program started, when its result came), on one clock."""
    for r in results.values():
        if r.ok or r.kind in LOCAL or r.kind in (C.STOPPED, C.SKIPPED) or r.node not in ran:
            continue
        began, ended = ran[r.node]
        late = []
        for other in results.values():
            if other.node == r.node:
                continue
            if other.kind == C.NOT_STARTED:
                late.append(f"{other.node}'s container never started")
            elif other.node in ran and ran[other.node][0] >= ended:
                gap = ran[other.node][0] - began
                late.append(f"{other.node}'s container started {gap:.0f} s after {r.node}'s, when its check was over")
            elif other.node in ran and ran[other.node][1] <= began:
                gap = began - ran[other.node][0]
                late.append(f"{r.node}'s container started {gap:.0f} s after {other.node}'s, when that check was over")
        if late:
            r.kind = C.PEER_LATE
            r.error = f"no peer to meet: {'; '.join(late)} ({r.line or r.error})"


def _memory_reason(m: FreeMemory) -> str:
    why = (
        f"{gib(m.cached)} of it is page cache, which dropping would free"
        if m.cache_would_do
        else f"the page cache ({gib(m.cached)}) would not make up for it"
    )
    return (
        f"{gib(m.free)} free for the GPU, the engine asks for {gib(m.need)} ({m.fraction:g} of memory) "
        f"and would refuse to start; {why}"
    )


def judge_memory(
    verdict: "Verdict", memory: dict[str, Memory | None], unified: list[str], fraction: float | None
) -> None:
    """Each node's free memory as read at the check, against what the engine will ask for.

    A node short of it fails the check like a rendezvous failure: on unified memory the engine
    refuses to start at that fraction (vLLM's "Free memory on device ... is less than desired GPU
    memory utilization"; SGLang's unbalanced-memory check), after minutes of loading weights.
    A node that failed otherwise keeps that failure; its memory becomes a warning.
    """
    for r in verdict.nodes.values():
        if r.node not in unified:
            continue
        r.memory = measure(r.node, memory.get(r.node), fraction)
        if r.memory is None or not r.memory.short:
            continue
        _fail_or_warn(verdict, r, C.MEMORY, f"free memory: {r.memory.message()}")


def judge_ipc_risks(verdict: "Verdict", risks: dict[str, IpcRisk]) -> None:
    """A node whose engine would lose its IPC objects when the SSH session ends fails the check: the
    launch would load the weights and then wait for ever (the semaphore trap). A node that failed
    otherwise keeps that failure; the trap becomes a warning."""
    for r in verdict.nodes.values():
        risk = risks.get(r.node)
        if risk is None:
            continue
        r.ipc = risk
        if not risk.at_risk:
            continue
        _fail_or_warn(verdict, r, C.IPC, f"{r.node}: {risk.why} (fix {risk.fix})")


def _fail_or_warn(verdict: "Verdict", r: NodeResult, kind: C, warning: str) -> None:
    """A node that passed so far fails with kind (its reason and fix explained); one that failed otherwise
    keeps that failure, the first cause, and this becomes a warning."""
    if r.ok:
        r.ok, r.kind = False, kind
        r.reason, r.fix = explain(r, verdict.setting)
    else:
        verdict.warnings.append(warning)


@dataclass
class Verdict:
    """The whole check: ok, or the root cause with the fix to try; per-node results in rank order."""

    setting: Setting
    nodes: dict[str, NodeResult] = field(default_factory=dict)
    seconds: float = 0.0
    check_id: str = ""
    warnings: list[str] = field(default_factory=list)
    leftovers: dict[str, Leftovers] = field(default_factory=dict)  # nodes with something left to free
    transit: list[Problem] = field(default_factory=list)  # what blocks a ring's forwarding, with fixes
    rails: list[RailResult] = field(default_factory=list)  # each RDMA half measured alone (--rails)
    halves: list[HalfResult] = field(default_factory=list)  # each fabric half's subnet pinged out of that half

    @property
    def stale(self) -> dict[str, list[str]]:
        """Stale containers by node: what a launch offers to remove."""
        return {n: [s.name for s in lo.stale] for n, lo in self.leftovers.items() if lo.stale}

    @property
    def ok(self) -> bool:
        return bool(self.nodes) and all(r.ok for r in self.nodes.values()) and not self.dead_halves

    @property
    def dead_halves(self) -> list[HalfResult]:
        """Fabric halves in NCCL_IB_HCA whose subnet carried no traffic: NCCL would stall on them."""
        return [h for h in self.halves if h.ok is False]

    @property
    def failed(self) -> list[NodeResult]:
        return [r for r in self.nodes.values() if not r.ok]

    @property
    def root(self) -> NodeResult | None:
        """The failure to name first."""

        def order(r: NodeResult) -> tuple:
            return (ROOT_ORDER.index(r.kind) if r.kind in ROOT_ORDER else len(ROOT_ORDER), r.rank)

        bad = sorted(self.failed, key=order)
        return bad[0] if bad else None

    @property
    def reason(self) -> str | None:
        r = self.root
        if r is None and self.dead_halves:
            return self.dead_halves[0].problem()
        return r.reason if r else None

    @property
    def fix(self) -> str | None:
        r = self.root
        if r is None and self.dead_halves:
            return (self.dead_halves[0].problem() or "").split(" Fix: ", 1)[-1]
        return r.fix if r else None

    @property
    def memory_short(self) -> list[FreeMemory]:
        """Nodes without the free memory the engine will ask for, as measured by the check."""
        return [r.memory for r in self.nodes.values() if r.memory is not None and r.memory.short]

    @property
    def droppable(self) -> list[str]:
        """Nodes whose shortfall a drop of the page cache would fix."""
        return [m.node for m in self.memory_short if m.cache_would_do]

    @property
    def transport(self) -> str | None:
        """The slowest data path any node reported (sockets over RDMA)."""
        seen = [r.transport for r in self.nodes.values() if r.ok and r.transport]
        for t in ("tcp", "socket", "rdma", "shm", "p2p"):
            if t in seen:
                return t
        return seen[0] if seen else None

    @property
    def bandwidth_gb_s(self) -> float | None:
        bw = [r.bandwidth_gb_s for r in self.nodes.values() if r.ok and r.bandwidth_gb_s is not None]
        return min(bw) if bw else None

    @property
    def line_rate_gb_s(self) -> float | None:
        return rate.line_rate_gb_s(self.setting.fabric)

    @property
    def share(self) -> float | None:
        """The measured bandwidth as a share of the line rate (speed x halves in use)."""
        return rate.share(self.bandwidth_gb_s, self.setting.fabric) if self.ok else None

    @property
    def pass_line_gb_s(self) -> float | None:
        """NVIDIA's pass line for the topology, where NCCL measured (a plain TCP stream is no NCCL number)."""
        if not self.ok or self.transport in (None, "tcp"):
            return None
        return rate.pass_line(self.setting.fabric)

    @property
    def below_pass_line(self) -> bool:
        line, bw = self.pass_line_gb_s, self.bandwidth_gb_s
        return line is not None and bw is not None and bw < line

    @property
    def nccl(self) -> str | None:
        return next((r.nccl for r in self.nodes.values() if r.nccl), None)

    @property
    def causes(self) -> list[str]:
        """Why the bandwidth falls short of the line rate, most likely first; empty when it does not."""
        sh = self.share
        if sh is None or (sh >= rate.SHORT and not self.below_pass_line):
            return []
        return rate.causes(self.transport, self.setting.fabric, self.nccl)

    def _rail_lines(self) -> list[str]:
        measured = [r for r in self.rails if r.share is not None]
        out = [f"  rail: {p}" for p in (r.problem() for r in self.rails) if p]
        out += [f"  rail not measured: {r.name()}: {r.error}" for r in self.rails if r.error]
        out += [f"  link: {ln}" for ln in links_short(self.rails)]
        if measured and len(out) == 0:
            low = min(measured, key=lambda r: r.share or 0)
            out.append(
                f"  rails: {len(measured)} measured alone, the slowest {low.name()} at {low.gbps:.1f} Gb/s "
                f"({(low.share or 0) * 100:.0f} % of its share)"
            )
        return out

    def to_json(self) -> dict:
        s = self.setting
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "check_id": self.check_id,
            "rendezvous": {"addr": s.addr, "port": s.port, "subnet": s.subnet},
            "image": s.image,
            "timeout": s.timeout,
            "start_window": s.start_window,
            "transport": self.transport,
            "bandwidth_gb_s": self.bandwidth_gb_s,
            "line_rate_gb_s": self.line_rate_gb_s,
            "line_rate_share": round(self.share, 3) if self.share is not None else None,
            "short_of_line_rate": self.causes,
            "pass_line_gb_s": self.pass_line_gb_s,
            "below_pass_line": self.below_pass_line,
            "nccl": self.nccl,
            "nccl_known_issue": rate.nccl_flag(self.nccl),
            "reason": self.reason,
            "fix": self.fix,
            "failed": [r.node for r in self.failed],
            "warnings": list(self.warnings),
            "drop_caches": self.droppable,
            "leftovers": [lo.to_json() for lo in self.leftovers.values() if lo.any],
            "ring_transit": [p.to_json() for p in self.transit],
            "rails": [r.to_json() for r in self.rails],
            "halves": [h.to_json() for h in self.halves],
            "paths": (s.fabric or {}).get("paths"),
            "links_short": links_short(self.rails),
            "ipc_at_risk": [r.node for r in self.nodes.values() if r.ipc is not None and r.ipc.at_risk],
            "nodes": [r.to_json() for r in self.nodes.values()],
        }

    def summary(self) -> str:
        """A few lines for people: the verdict, the fix, then one line per node."""
        s = self.setting
        if self.ok:
            bw = self.bandwidth_gb_s
            what = next((r.bandwidth_what for r in self.nodes.values() if r.bandwidth_what), "bandwidth")
            sh, line = self.share, self.line_rate_gb_s
            out = [
                f"preflight ok in {self.seconds:.1f} s: {len(self.nodes)} node(s) met at {s.addr}:{s.port}"
                + (f" over {self.transport}" if self.transport else "")
                + (f", {what} {bw:.2f} GB/s" if bw is not None else "")
                + (f" = {sh * 100:.0f} % of line rate ({line:.2f} GB/s)" if sh is not None and line else "")
            ]
            if self.pass_line_gb_s is not None and bw is not None:
                out.append(f"  {bw:.2f} GB/s {rate.pass_words(bw, s.fabric)}")
            if self.nccl:
                flag = rate.nccl_flag(self.nccl)
                out.append(f"  NCCL {self.nccl} in the image" + (f": {flag}" if flag else ""))
            if rate.scope(s.fabric) and bw is not None:
                out.append(f"  {rate.scope(s.fabric)}")
            out += [f"  short of line rate, likely: {c}" for c in self.causes]
        else:
            out = [f"preflight FAILED in {self.seconds:.1f} s: {self.reason}", f"  try: {self.fix}"]
        paths = (s.fabric or {}).get("paths")
        # the nodes' lines below name the bootstrap interface: say the data path where it differs
        if paths and (paths.get("data") or {}).get("subnet") != (paths.get("bootstrap") or {}).get("subnet"):
            out.append(f"  paths: {describe_paths(paths)}")
        for r in self.nodes.values():
            where = " ".join(x for x in (r.iface, r.ip) if x)
            if r.ok:
                state = (
                    "ok"
                    + (f", {r.transport}" if r.transport else "")
                    + (f", {r.bandwidth_gb_s:.2f} GB/s" if r.bandwidth_gb_s is not None else "")
                )
            else:
                state = f"failed ({check_words(r.kind)}): {r.reason}"
            if r.memory is not None and r.kind != C.MEMORY:
                state += f"; {r.memory.brief()}"
            out.append(f"  {r.node} (rank {r.rank}{', ' + where if where else ''}): {state}")
            if r.transport_line and r.ok:
                out.append(f"    {r.transport_line.strip()}")
        out += [f"  ring transit: {p.line()}" for p in self.transit]
        out += [f"  half: {h.problem()}" for h in self.dead_halves if h is not self.dead_halves[0] or self.root]
        out += [f"  half not proven: {h.name()}: {h.error}" for h in self.halves if h.ok is None and h.error]
        if self.halves and not self.dead_halves and all(h.ok for h in self.halves):
            out.append(
                f"  halves: {len(self.halves)} fabric subnet(s) carried traffic "
                f"({', '.join(sorted({h.rail['subnet'] for h in self.halves}))})"
            )
        out += self._rail_lines()
        out += [f"  warning: {w}" for w in self.warnings]
        out += [f"  left over: {ln}" for lo in self.leftovers.values() for ln in lo.lines()]
        return "\n".join(out)
