"""What to launch again: options for a pivot or a redeploy, and the default planner that re-plans them.

A pivot goes from any engine to any other. It keeps the model, TP/PP, the nodes and the rendezvous
network, pinned to what the first plan resolved, and what the user set that the new engine understands
too: a flag is carried when both engines map its shared term (Engine.vocabulary: API key, served name,
context length, memory fraction, ...), renamed where they spell it differently. The image and mode
belong to one engine; flags without an equivalent are dropped and named, never silently.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Awaitable, Callable

from ..plan import modelconfig
from ..config.config import Config
from ..engines import ENGINES, find_engine, label, next_engine
from ..engines.base import TERMS
from ..plan.plan import Plan, PlanOptions, make_plan
from ..remote.ssh import Cluster
from .record import Record

Planner = Callable[[PlanOptions], Awaitable[Plan]]


def other_engine(engine: str) -> str:
    """Where a pivot goes unless told: the next engine of the registry's pivot cycle (engines.next_engine)."""
    return next_engine(engine)


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
        new.extra_args = translate_args(opts.extra_args, opts.engine, to, opts.env).args
    if record is not None:
        new.tp = new.tp if new.tp is not None else (record.tp or None)
        new.pp = new.pp if new.pp is not None else (record.pp or None)
        new.rendezvous = new.rendezvous or record.subnet
        new.nodes = new.nodes or (list(record.nodes) or None)
    return new


# The flag tables are each engine's (Engine.switches, managed_flags, companions), read over the registry when a
# pivot translates: a user's flag may be any engine's spelling.
def _switches() -> set[str]:
    """Flags that take no value (the others take the next word unless it is a flag itself)."""
    return {f for e in ENGINES.values() for f in e.switches}


def _managed() -> set[str]:
    """Flags the plan writes itself, in every spelling (the pinned TP/PP, the model, ports, rendezvous): never
    carried."""
    return {f for e in ENGINES.values() for f in e.managed_flags}


def _companions() -> set[str]:
    """Flags that only go beside another in some engine (vLLM's --enable-auto-tool-choice): never carried as such,
    the new engine's own companions are added back where it needs them."""
    return {c for e in ENGINES.values() for c in e.companions.values()}


@dataclass
class Translation:
    args: list[str]  # the flags for the new engine
    carried: list[str]  # as the confirmation says it: "--api-key", "--disable-cuda-graph as --enforce-eager"
    dropped: list[str]  # flags the new engine has no equivalent for


def _flags(args: list[str]) -> list[tuple[str, str | None, bool]]:
    """(flag, value, written with =) for each flag of an argument list; a stray word is its own flag."""
    out: list[tuple[str, str | None, bool]] = []
    switches = _switches()
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and "=" in a:
            f, v = a.split("=", 1)
            out.append((f, v, True))
        elif a.startswith("-") and a not in switches and i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append((a, args[i + 1], False))
            i += 1
        else:
            out.append((a, None, False))
        i += 1
    return out


def translate_args(args: list[str], frm: str, to: str, env: dict[str, str] | None = None) -> Translation:
    """The user's extra engine flags for engine `to`: each flag of `frm` goes through its shared term
    (Engine.vocabulary) to `to`'s flag for it, kept or renamed; a flag without one is named as dropped.

    Authentication is never lost: a key the old engine read from its variable (vLLM's VLLM_API_KEY),
    which the new one does not read, becomes the new engine's API key flag.
    """
    t = Translation([], [], [])
    if frm == to:
        t.args = list(args)
        return t
    src, dst = find_engine(frm), find_engine(to)
    key_flag = dst.flag("api_key") if dst else None
    has_key = False
    managed, companions = _managed(), _companions()
    for name, value, eq in _flags(args):
        if name in managed:
            continue  # the plan writes it for the new engine from the pinned options
        if name in companions:
            continue  # added back below where the new engine needs it
        term = src.term(name) if src else None
        new = dst.flag(term) if dst and term else None
        if new is None:
            t.dropped.append(name)
            continue
        t.carried.append(name if new == name else f"{name} as {new}")
        has_key = has_key or new == key_flag
        if value is None:
            t.args.append(new)
        else:
            t.args += [f"{new}={value}"] if eq else [new, value]
    have = [f for f, _, _ in _flags(t.args)]
    for flag, companion in dst.companions.items() if dst else ():
        if flag in have:
            t.args.append(companion)
    var = src.api_key_env if src else None
    key = (env or {}).get(var) if var else None
    if key and key_flag and not has_key and (dst.api_key_env != var):
        t.args += [key_flag, key]
        t.carried.append(f"{var} as {key_flag}")
    return t


def api_key_of(opts: PlanOptions | None) -> str | None:
    """The key the endpoint demands (its API key flag, or the variable it also reads: vLLM's VLLM_API_KEY),
    so readiness checks can send it."""
    if opts is None:
        return None
    eng = find_engine(opts.engine)
    key_flag = (eng.flag("api_key") if eng else None) or "--api-key"
    for flag, value, _ in _flags(opts.extra_args):
        if flag == key_flag and value:
            return value
    var = eng.api_key_env if eng else None
    return opts.env.get(var) or None if var else None


def pivot_notes(opts: PlanOptions, to: str) -> list[str]:
    """What the confirmation says about the user's flags: what is carried over and what cannot be."""
    if to == opts.engine:
        return []
    t = translate_args(opts.extra_args, opts.engine, to, opts.env)
    name = label(to)
    notes = []
    if t.dropped:
        notes.append(f"not carried over to {name} (no equivalent): {', '.join(t.dropped)}")
    if t.carried:
        notes.append(f"carried over to {name}: {', '.join(t.carried)}")
    src, dst = find_engine(opts.engine), find_engine(to)
    for flag in t.dropped:  # what the new engine offers instead, where it says
        term = src.term(flag) if src else None
        if dst and term in dst.not_carried:
            notes.append(f"{flag}: {dst.not_carried[term]}")
    # the options (not flags) the new engine has no flag for: the served name, the memory fraction
    for term, given in (("served_name", opts.served_model_name), ("mem_fraction", opts.mem_fraction)):
        if given is not None and dst and term in dst.not_carried:
            notes.append(f"{TERMS[term]} ({given}): {dst.not_carried[term]}")
    return notes


def options_of(plan: Plan) -> PlanOptions:
    """Options that reproduce a plan given without its options (everything pinned)."""
    return PlanOptions(
        engine=plan.engine,
        mode=plan.mode,
        image=plan.image,
        model_path=plan.model_path,
        served_model_name=plan.served_model_name,
        tp=plan.tp,
        pp=plan.pp,
        nodes=[n.name for n in plan.nodes],
        rendezvous=plan.subnet,
        dist_port=plan.dist_port,
        port=plan.port,
        ray_port=plan.ray_port,
        deployment=plan.deployment,
    )


async def read_model_config(cluster: Cluster, config: Config, path: str) -> dict | None:
    """The model's config.json from the node holding it first (TP checks read its head counts); None when
    absent, ModelConfigError when it cannot be used."""
    node = cluster.nodes.get(config.model.source or config.head.name)
    if node is None:
        return None
    return await modelconfig.fetch(node, path)


def inventory_planner(cluster: Cluster, config: Config) -> Planner:
    """Probe every node, then make_plan: what pivot and redeploy use unless given another planner."""
    from ..nodes.inventory import take_inventory

    async def plan(opts: PlanOptions) -> Plan:
        inv = await take_inventory(cluster, config)
        if opts.model_config is None:
            try:
                opts.model_config = await read_model_config(cluster, config, opts.model_path or config.model.path)
            except modelconfig.ModelConfigError as e:  # planned without it; the plan says why
                opts.model_config_problem = str(e)
        return make_plan(config, inv.facts, inv.subnets, opts)

    return plan
