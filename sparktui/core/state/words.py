"""The deployment's vocabularies in plain words, for every front (the CLI's lines, the TUI's notices):
milestones, start-up phases, problem kinds, the preflight's check kinds and operations.

Internal ids (`weights_loading`, `size_gib`) never reach the user: a known milestone has its own
sentence, and an unknown one still reads as words with units ("KV cache 70.4 GiB").
"""

from __future__ import annotations

from typing import Any

from .states import CheckKind as C, MilestoneKind as K, Op, Phase, ProblemKind as P

# A data key's unit (suffix) and how it reads.
_UNITS = (("_gib", "GiB"), ("_gb", "GB"), ("_mib", "MiB"), ("_s", "s"), ("seconds", "s"), ("percent", "%"))


def _number(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.1f}"


def data_words(data: dict) -> str:
    """{'size_gib': 70.41, 'tokens': 12345} -> '70.4 GiB, 12,345 tokens'."""
    parts = []
    for k, v in data.items():
        for suffix, unit in _UNITS:
            if k.endswith(suffix):
                parts.append(f"{_number(v)} {unit}")
                break
        else:
            name = k.replace("_", " ")  # a count reads number first ("12 tokens"), anything else name first
            parts.append(
                f"{_number(v)} {name}" if k.endswith("s") and isinstance(v, (int, float)) else f"{name} {_number(v)}"
            )
    return ", ".join(parts)


def _milestone(kind: str) -> str:
    """Its member: a saved word from before a rename reads as the milestone it names now."""
    try:
        return K(kind)
    except ValueError:
        return kind  # an unknown one still reads as its words


def milestone_words(kind: str, data: dict | None = None) -> str:
    d = dict(data or {})
    kind = _milestone(kind)
    if kind in _MILESTONES:
        return _MILESTONES[kind]
    if kind == K.TRANSPORT:
        if d.get("transport") == "gloo":
            return "collectives over gloo (a CPU build: no NCCL)"
        if d.get("transport") == "rdma":
            dev = f" ({d['device']})" if d.get("device") else ""
            return f"NCCL over RDMA{dev}"
        iface = f" on {d['iface']}" if d.get("iface") else ""
        return f"NCCL over TCP sockets{iface} (slow path)"
    if kind == K.NCCL_NET:
        return f"NCCL uses {d.get('label') or 'an unknown network'}" + "".join(f"; {f}" for f in d.get("flags") or [])
    if kind == K.WEIGHTS_LOADING:
        pct = d.get("percent")
        return (
            "weights loaded"
            if pct == 100
            else f"loading weights {_number(pct)} %"
            if pct is not None
            else "loading weights"
        )
    if kind == K.KV_CACHE:
        size = [f"{d[k]:.1f} GiB" for k in ("size_gib",) if k in d] + [f"{d[k]:.1f} GB" for k in ("size_gb",) if k in d]
        tokens = [f"{d['tokens']:,} tokens"] if "tokens" in d else []
        return "KV cache " + ", ".join(size + tokens) if size or tokens else "KV cache allocated"
    if kind == K.CUDA_GRAPH:
        if d.get("phase") == "end":
            secs = f" in {d['seconds']:.1f} s" if isinstance(d.get("seconds"), (int, float)) else ""
            return f"CUDA graphs captured{secs}"
        return "capturing CUDA graphs"
    if kind == K.READY:
        return "ready" + (" (serving requests)" if d.get("from") == "requests" else "")
    rest = data_words(d)
    return kind.replace("_", " ") + (f" {rest}" if rest else "")


def milestone_short(kind: str, data: dict | None = None) -> str:
    """A milestone as a timeline's step: "dist init ✓", "NCCL RDMA", "KV 70.4 GiB"."""
    d = dict(data or {})
    kind = _milestone(kind)
    if kind in _SHORT:
        return _SHORT[kind]
    if kind == K.TRANSPORT:
        if d.get("transport") == "gloo":
            return "gloo"
        return "NCCL RDMA" if d.get("transport") == "rdma" else "NCCL TCP"
    if kind == K.NCCL_NET:  # what this rank's NCCL uses (core/network/fabric_live), flagged against the plan
        return (d.get("label") or "NCCL net") + (" ⚠" if d.get("flags") else "")
    if kind == K.WEIGHTS_LOADING:
        pct = d.get("percent")
        return "weights ✓" if pct == 100 else f"weights {pct}%"
    if kind == K.KV_CACHE:
        if "size_gib" in d:
            return f"KV {d['size_gib']:.1f} GiB"
        if "tokens" in d:
            return f"KV {d['tokens']:,} tok"
        return "KV cache"
    if kind == K.CUDA_GRAPH:
        return "graphs ✓" if d.get("phase") == "end" else "graphs…"
    return milestone_words(kind, d)


_SHORT = {
    K.CONTAINER_STARTED: "started",
    K.DIST_INIT_BEGIN: "dist init…",
    K.DIST_INIT_END: "dist init ✓",
    K.RAY_STARTED: "ray up",
    K.RAY_CONNECTED: "ray joined",
    K.SLOW_LOAD: "slow load",
    K.READY: "READY",
}

# The milestones whose words carry no data.
_MILESTONES = {
    K.CONTAINER_STARTED: "container started",
    K.RAY_STARTED: "Ray started",
    K.RAY_CONNECTED: "joined the Ray cluster",
    K.DIST_INIT_BEGIN: "distributed init started",
    K.DIST_INIT_END: "distributed init done",
    K.SLOW_LOAD: "weights loading slowly",
}

# A start-up phase as a noun: "stopped during {weight loading}", "reached {KV cache allocation}".
PHASES = {
    Phase.CONTAINER: "container start",
    Phase.RAY_JOIN: "Ray join",
    Phase.DIST_INIT: "distributed init",
    Phase.NCCL_INIT: "NCCL communicator init",
    Phase.WEIGHTS: "weight loading",
    Phase.KV_CACHE: "KV cache allocation",
    Phase.GRAPHS: "CUDA graph capture or compile warm-up",
    Phase.HTTP_UP: "HTTP start-up (warm-up)",
    Phase.FIRST_REQUEST: "serving",
}


def phase_words(phase: str) -> str:
    return PHASES.get(phase) or phase.replace("_", " ")  # a plain word finds its member: the same hash


# A problem's kind as a title ("rendezvous hang on spark2: ..."); the rest read as their words.
PROBLEMS = {
    P.HOST_OOM: "host out of memory",
    P.NCCL_ERROR: "NCCL error",
    P.RAY_CONNECT: "Ray connect",
    P.RAY_MISSING: "Ray missing",
    P.RAY_NODE_IP: "Ray node IP",
    P.RAY_RESOURCES: "Ray resources",
    P.RAY_UNSUPPORTED: "Ray unsupported",
}


def problem_words(kind: str) -> str:
    """rendezvous_hang -> 'rendezvous hang'; an engine's own kind reads as its words too."""
    return PROBLEMS.get(kind) or kind.replace("_", " ")


# What a node's preflight check failed of, as its row's mark ("✗ port in use") and in the verdict's lines.
CHECKS = {
    C.SSH: "SSH",
    C.PYTHON_MISSING: "no python3",
    C.DOCKER: "docker error",
    C.NOT_STARTED: "container not started",
    C.REFUSED: "connection refused",
    C.RDMA: "RDMA error",
    C.GPU: "no usable GPU",
    C.NCCL: "NCCL error",
    C.TIMEOUT: "timed out",
    C.UNKNOWN: "failed",
    C.MEMORY: "low memory",
    C.IPC: "semaphore trap",
}


def check_words(kind: str | None) -> str:
    """port_in_use -> 'port in use'; ipc -> 'semaphore trap'; no kind -> 'failed'."""
    return CHECKS.get(kind or C.UNKNOWN) or (kind or "").replace("_", " ")


# Operation ids (what runs) in words, as a noun ("Sync model failed") and as a doing ("syncing model").
OPERATIONS = {
    Op.LAUNCH: ("Launch", "launching"),
    Op.STOP: ("Stop", "stopping"),
    Op.PIVOT: ("Pivot", "pivoting"),
    Op.REDEPLOY: ("Redeploy", "redeploying"),
    Op.REPLACE: ("Replace", "replacing"),
    Op.SYNC_MODEL: ("Sync model", "syncing model"),
    Op.SYNC_IMAGE: ("Sync image", "syncing image"),
    Op.REFRESH: ("Probe", "probing nodes"),
    Op.CONNECT: ("Connect", "connecting"),
    Op.PREPARE_STOP: ("Stop", "preparing stop"),
    Op.PREPARE_PIVOT: ("Pivot", "preparing pivot"),
    Op.PREPARE_REDEPLOY: ("Redeploy", "preparing redeploy"),
}


def operation_name(op: Op | str) -> str:
    return OPERATIONS.get(op, (op.replace("_", " ").capitalize(), ""))[0]


def operation_doing(op: Op | str) -> str:
    return OPERATIONS.get(op, ("", op.replace("_", " ")))[1]
