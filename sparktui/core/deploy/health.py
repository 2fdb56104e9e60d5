"""Is a ready endpoint still serving? A light /health poll through the SSH forward to the head.

Readiness proves the endpoint once, with a chat completion; after that an engine can still die
(a killed process, an OOM) while its container or HTTP port lingers. The deployer polls /health
while ready so that shows at once, and `sparktui status` asks the same of every deployment.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..config.config import Config
from ..remote.ssh import Cluster
from .readiness import _call
from .record import load_record

HEALTH_INTERVAL_S = 5.0
HEALTH_TIMEOUT_S = 5.0
FAILS_BEFORE_UNHEALTHY = 2  # one slow answer under load is not a dead engine


async def probe_health(base: str, timeout: float = HEALTH_TIMEOUT_S) -> tuple[bool, str, bool]:
    """(ok, detail, refused) for GET base/health; refused means nothing listens at the local end."""
    status, _, err, refused = await _call(base + "/health", None, timeout)
    if status == 200:
        return True, "healthy", False
    return False, f"/health: HTTP {status}" if status is not None else f"/health: {err or 'no answer'}", refused


def _port_of(config: Config, engine: str, record: Any) -> int:
    if record is not None and record.engine == engine and record.port:
        return record.port
    return config.port_for(engine)


async def _liveness(
    cluster: Cluster, config: Config, d: dict, node: str, engine: str, port: int, base: str, rec: Any
) -> None:
    """A healthy endpoint that gives no token to a one-token completion, and generates none meanwhile, is wedged."""
    from .metrics_read import Target
    from .options import api_key_of
    from .serving import LOOK_AT, check_wedged

    why, unsure = await check_wedged(
        cluster[node],
        Target(d["name"], engine, node, port),
        base,
        rec.served_model_name if rec is not None else None,
        api_key_of(rec.options) if rec is not None else None,
        config.engine.wedge_after,
    )
    d["serving"] = "wedged" if why else "unknown" if unsure else "ready"
    if why:
        d["health"] = f"wedged: {why}"
        d["look_at"] = LOOK_AT
    elif unsure:
        d["health"] = f"healthy; cannot tell whether it still generates: {unsure}"


async def health_of(cluster: Cluster, config: Config, deployments: list[dict]) -> None:
    """Add "endpoint" and "health" to each deployment of containers.summarize(), asking its head; a healthy one
    also gets "serving": ready, or wedged (with "look_at") when a one-token completion gets no answer, or unknown
    when it gets none and the engine's metrics cannot say whether tokens flow meanwhile."""

    async def one(d: dict) -> None:
        heads = [c for c in d["containers"] if c.get("rank") == "0"] or d["containers"][:1]
        if not heads:
            return
        head = heads[0]
        engine = d["engine"].split(",")[0]
        try:
            rec = await load_record(cluster[config.head.name], d["name"])
        except Exception:  # noqa: BLE001 - no record: the engine's default port
            rec = None
        port = _port_of(config, engine, rec)
        if port is not None:
            d["endpoint"] = f"http://{config.node(head['node']).host}:{port}/v1"
        if port is None:  # no engine label and no record: no port to ask, and no endpoint to show
            d["health"] = f"unknown: {head['name']} has no sparktui.engine label, so its port is not known"
        elif head.get("state") != "running":
            d["health"] = f"down: {head['name']} on {head['node']} is {head.get('state')}"
        else:
            try:
                local = await cluster[head["node"]].forward(port)
            except Exception as e:  # noqa: BLE001 - link down: say so, do not fail the status
                d["health"] = f"unknown: no forward to {head['node']}:{port} ({e})"
            else:
                base = f"http://127.0.0.1:{local}"
                ok, detail, _ = await probe_health(base)
                d["health"] = "healthy" if ok else f"unhealthy: {detail}"
                if ok:
                    await _liveness(cluster, config, d, head["node"], engine, port, base, rec)
        d["summary"] += " · " + " ".join(filter(None, (d.get("endpoint"), d["health"])))
        if "look_at" in d:
            d["summary"] += f"\n    look at: {d['look_at']}"

    await asyncio.gather(*(one(d) for d in deployments if "containers" in d and d.get("name") not in (None, "?")))
