"""Find transfers again from their state directories (after sparktui restarted), and cancel them."""

from __future__ import annotations

import asyncio

from . import remote
from .errors import TransferError
from .state import RUNNING, TransferRecord, Unreadable, parse_listing


async def list_transfers(
    cluster, names: list[str] | None = None, problems: list[Unreadable] | None = None
) -> list[TransferRecord]:
    """Every transfer recorded on the (reachable) nodes, oldest first; those whose state cannot be read go
    to `problems` when given (left out otherwise)."""
    names = names or list(cluster.nodes)

    async def one(name: str) -> list[TransferRecord]:
        r = await cluster[name].run(remote.list_states(), timeout=60)
        return parse_listing(r.stdout, name, problems) if r.ok else []

    found = await asyncio.gather(*(one(n) for n in names))
    out = [rec for recs in found for rec in recs]
    out.sort(key=lambda rec: rec.meta.started)
    return out


def running_to(records: list[TransferRecord], dest: str, kind: str) -> TransferRecord | None:
    return next((r for r in records if r.meta.dest == dest and r.meta.kind == kind and r.state == RUNNING), None)


async def transfer_status(cluster, config=None) -> list[dict]:
    """Transfers on every reachable node, as plain dicts (for `sparktui status` and `sync status`).

    Keys: id, kind, source, dest, state (running|unverified|done|failed|cancelled|lost|unreadable), rc,
    started, path, image, bytes, total_bytes, percent, rate, eta, elapsed, files_done,
    files_total, message, verified.
    """
    names = [n for n, node in cluster.nodes.items() if getattr(node, "connected", True)] or list(cluster.nodes)
    problems: list[Unreadable] = []
    found = [r.to_dict() for r in await list_transfers(cluster, names, problems)]
    return found + [p.to_dict() for p in problems]  # state "unreadable", the reason in "message"


async def cancel_transfer(cluster, tid: str) -> str:
    """Stop a transfer wherever it runs; partial files stay so the next sync resumes. Returns a sentence."""
    remote.check_id(tid)
    records = await list_transfers(cluster)
    rec = next((r for r in records if r.id == tid), None)
    if rec is None:
        raise TransferError(f"no transfer {tid} on any reachable node (see `sparktui sync status`)")
    if rec.state != RUNNING:
        return f"{tid} is not running ({rec.state})"
    r = await cluster[rec.meta.source].run(remote.cancel(tid), timeout=60)
    if not r.ok:
        raise TransferError(f"could not stop {tid} on {rec.meta.source}: {r.stderr.strip() or r.exit_status}")
    if "finished" in r.stdout:
        return f"{tid} had already finished"
    kept = "; partial files are kept, the next sync resumes from them" if rec.meta.kind == "model" else ""
    return f"stopped {tid} ({rec.meta.source} -> {rec.meta.dest}){kept}"
