"""Milestones and operations in plain words, for every front (the CLI's lines, the TUI's notices).

Internal ids (`weights_loading`, `size_gib`) never reach the user: a known milestone has its own
sentence, and an unknown one still reads as words with units ("KV cache 70.4 GiB").
"""

from __future__ import annotations

from typing import Any

from .states import Op

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


def milestone_words(kind: str, data: dict | None = None) -> str:
    d = dict(data or {})
    if kind == "container_started":
        return "container started"
    if kind == "ray_started":
        return "Ray started"
    if kind == "ray_connected":
        return "joined the Ray cluster"
    if kind == "dist_init_begin":
        return "distributed init started"
    if kind == "dist_init_end":
        return "distributed init done"
    if kind == "nccl_transport":
        if d.get("transport") == "gloo":
            return "collectives over gloo (a CPU build: no NCCL)"
        if d.get("transport") == "rdma":
            dev = f" ({d['device']})" if d.get("device") else ""
            return f"NCCL over RDMA{dev}"
        iface = f" on {d['iface']}" if d.get("iface") else ""
        return f"NCCL over TCP sockets{iface} (slow path)"
    if kind == "nccl_net":
        return f"NCCL uses {d.get('label') or 'an unknown network'}" + "".join(f"; {f}" for f in d.get("flags") or [])
    if kind == "weights_loading":
        pct = d.get("percent")
        return (
            "weights loaded"
            if pct == 100
            else f"loading weights {_number(pct)} %"
            if pct is not None
            else "loading weights"
        )
    if kind == "slow_load":
        return "weights loading slowly"
    if kind == "kv_cache":
        size = [f"{d[k]:.1f} GiB" for k in ("size_gib",) if k in d] + [f"{d[k]:.1f} GB" for k in ("size_gb",) if k in d]
        tokens = [f"{d['tokens']:,} tokens"] if "tokens" in d else []
        return "KV cache " + ", ".join(size + tokens) if size or tokens else "KV cache allocated"
    if kind == "cuda_graph":
        if d.get("phase") == "end":
            secs = f" in {d['seconds']:.1f} s" if isinstance(d.get("seconds"), (int, float)) else ""
            return f"CUDA graphs captured{secs}"
        return "capturing CUDA graphs"
    if kind == "ready":
        return "ready" + (" (serving requests)" if d.get("from") == "requests" else "")
    rest = data_words(d)
    return kind.replace("_", " ") + (f" {rest}" if rest else "")


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
