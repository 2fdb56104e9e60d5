"""What to launch again: options for a pivot or a redeploy, and the default planner that re-plans them.

A pivot keeps the model, TP/PP, the nodes and the rendezvous network, pinned to what the first plan
resolved; what belongs to one engine (image, mode, extra flags) is dropped.
"""
from __future__ import annotations

import copy
import json
from typing import Awaitable, Callable

from ..config import Config
from ..plan import Plan, PlanOptions, make_plan
from ..ssh import Cluster
from .record import Record

Planner = Callable[[PlanOptions], Awaitable[Plan]]


def other_engine(engine: str) -> str:
    return "vllm" if engine == "sglang" else "sglang"


def pivot_options(opts: PlanOptions, to: str, record: Record | None = None) -> PlanOptions:
    """Options for engine `to`: same model, TP/PP, nodes and rendezvous network.

    What the first plan resolved (TP, subnet, rank order) is pinned, so a default that would now
    resolve differently cannot change them.
    """
    new = copy.deepcopy(opts)
    new.model_config = None
    if to != opts.engine:
        new.engine = to
        new.mode = None
        new.image = None
        new.extra_args = []
    if record is not None:
        new.tp = new.tp if new.tp is not None else (record.tp or None)
        new.pp = new.pp if new.pp is not None else (record.pp or None)
        new.rendezvous = new.rendezvous or record.subnet
        new.nodes = new.nodes or (list(record.nodes) or None)
    return new


def options_of(plan: Plan) -> PlanOptions:
    """Options that reproduce a plan given without its options (everything pinned)."""
    return PlanOptions(engine=plan.engine, mode=plan.mode, image=plan.image, model_path=plan.model_path,
                       served_model_name=plan.served_model_name, tp=plan.tp, pp=plan.pp,
                       nodes=[n.name for n in plan.nodes], rendezvous=plan.subnet, dist_port=plan.dist_port,
                       port=plan.port, ray_port=plan.ray_port, deployment=plan.deployment)


async def read_model_config(cluster: Cluster, config: Config, path: str) -> dict | None:
    """The model's config.json from the node holding it first (TP checks read its head counts)."""
    node = cluster.nodes.get(config.model.source or config.head.name)
    if node is None:
        return None
    r = await node.run(["cat", path.rstrip("/") + "/config.json"], timeout=15)
    try:
        data = json.loads(r.stdout) if r.ok else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def inventory_planner(cluster: Cluster, config: Config) -> Planner:
    """Probe every node, then make_plan: what pivot and redeploy use unless given another planner."""
    from ..inventory import take_inventory

    async def plan(opts: PlanOptions) -> Plan:
        inv = await take_inventory(cluster, config)
        if opts.model_config is None:
            opts.model_config = await read_model_config(cluster, config, opts.model_path or config.model.path)
        return make_plan(config, inv.facts, inv.subnets, opts)

    return plan
