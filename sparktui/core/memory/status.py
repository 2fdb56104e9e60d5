"""One reading per node for `sparktui status` (its own process: no history, so no fall rate), and the JSON
shape a node's memory has wherever it is shown (status, launch --json)."""

from __future__ import annotations

import asyncio

from ..config.config import MemoryConfig
from ..remote.ssh import Cluster
from .guard import GIB, Guard
from .reader import MemReader
from .sample import MemSample


def memory_json(s: MemSample, level: str, detail: str) -> dict:
    return {
        "available": s.available,
        "total": s.total,
        "swap_used": s.swap_used,
        "psi_full": s.psi_full,
        "level": level,
        "detail": detail or s.error or "",
    }


def memory_words(node: str, m: dict) -> str:
    """`spark2 memory: 11.5 of 128.0 GiB available, pressure 0.5% (warn: ...)`: one short line."""
    if m["available"] is None or not m["total"]:
        return f"{node} memory: not read ({m['detail']})"
    psi = "" if m["psi_full"] is None else f", pressure {m['psi_full']:g}%"
    why = f" ({m['level']}: {m['detail']})" if m["level"] != "ok" and m["detail"] else ""
    return f"{node} memory: {m['available'] / GIB:.1f} of {m['total'] / GIB:.1f} GiB available{psi}{why}"


async def read_all(cluster: Cluster, cfg: MemoryConfig, nodes: list[str]) -> dict[str, dict]:
    """node -> memory_json of one reading each, judged by the guard; a node that cannot say is "unwatched"."""
    guard = Guard(cfg)

    async def one(name: str) -> tuple[str, dict]:
        reader = MemReader(cluster[name])
        try:
            s = await reader.sample()
        finally:
            await reader.close()
        v = guard.judge(s)
        return name, memory_json(s, v.level, v.detail)

    return dict(await asyncio.gather(*(one(n) for n in nodes)))
