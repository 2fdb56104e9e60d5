"""What to launch again: options for a pivot or a redeploy, and the default planner that re-plans them.

A pivot keeps the model, TP/PP, the nodes and the rendezvous network, pinned to what the first plan
resolved, and what the user set that the other engine understands too (API key, served name, context
length, memory fraction, env, flags both engines share or that have an equivalent). The image and mode
belong to one engine; flags without an equivalent are dropped and named, never silently.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
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
        new.extra_args = translate_args(opts.extra_args, opts.engine, to, opts.env).args
    if record is not None:
        new.tp = new.tp if new.tp is not None else (record.tp or None)
        new.pp = new.pp if new.pp is not None else (record.pp or None)
        new.rendezvous = new.rendezvous or record.subnet
        new.nodes = new.nodes or (list(record.nodes) or None)
    return new


# Flags both engines read with one meaning: carried as they are.
SHARED = {"--api-key", "--served-model-name", "--trust-remote-code", "--dtype", "--kv-cache-dtype", "--quantization",
          "--load-format", "--download-dir", "--chat-template", "--revision", "--tool-call-parser",
          "--reasoning-parser"}
# SGLang flag -> vLLM flag with the same effect.
SGLANG_TO_VLLM = {"--context-length": "--max-model-len", "--mem-fraction-static": "--gpu-memory-utilization",
                  "--tokenizer-path": "--tokenizer", "--random-seed": "--seed",
                  "--max-running-requests": "--max-num-seqs", "--disable-cuda-graph": "--enforce-eager"}
VLLM_TO_SGLANG = {v: k for k, v in SGLANG_TO_VLLM.items()}
# Flags that take no value (the others take the next word unless it is a flag itself).
SWITCHES = {"--trust-remote-code", "--disable-cuda-graph", "--enforce-eager", "--enable-auto-tool-choice",
            "--disable-radix-cache", "--enable-metrics", "--enable-dp-attention", "--skip-server-warmup",
            "--enable-prefix-caching", "--no-enable-prefix-caching", "--enable-chunked-prefill",
            "--disable-log-requests", "--disable-log-stats", "--enable-expert-parallel", "--headless"}
ALIASES = {"--tp": "--tensor-parallel-size", "--tp-size": "--tensor-parallel-size", "-tp": "--tensor-parallel-size",
           "--pp": "--pipeline-parallel-size", "--pp-size": "--pipeline-parallel-size",
           "-pp": "--pipeline-parallel-size", "--model": "--model-path"}
# The plan writes these itself (the pinned TP/PP, the model, ports, rendezvous): never carried.
MANAGED = {"--tensor-parallel-size", "--pipeline-parallel-size", "--model-path", "--host", "--port", "--nnodes",
           "--node-rank", "--dist-init-addr", "--nccl-init-addr", "--master-addr", "--master-port",
           "--distributed-executor-backend", "--headless"}
ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}


@dataclass
class Translation:
    args: list[str]  # the flags for the new engine
    carried: list[str]  # as the confirmation says it: "--api-key", "--disable-cuda-graph as --enforce-eager"
    dropped: list[str]  # flags the new engine has no equivalent for


def _flags(args: list[str]) -> list[tuple[str, str | None, bool]]:
    """(flag, value, written with =) for each flag of an argument list; a stray word is its own flag."""
    out: list[tuple[str, str | None, bool]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and "=" in a:
            f, v = a.split("=", 1)
            out.append((f, v, True))
        elif a.startswith("-") and a not in SWITCHES and i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append((a, args[i + 1], False))
            i += 1
        else:
            out.append((a, None, False))
        i += 1
    return out


def translate_args(args: list[str], frm: str, to: str, env: dict[str, str] | None = None) -> Translation:
    """The user's extra engine flags for engine `to`: shared ones kept, equivalents renamed, the rest named.

    Authentication is never lost: vLLM also takes its key from VLLM_API_KEY, which SGLang does not read,
    so that key becomes --api-key for SGLang.
    """
    t = Translation([], [], [])
    if frm == to:
        t.args = list(args)
        return t
    table = SGLANG_TO_VLLM if (frm, to) == ("sglang", "vllm") else VLLM_TO_SGLANG if (frm, to) == ("vllm", "sglang") else {}
    has_key = False
    for flag, value, eq in _flags(args):
        name = ALIASES.get(flag, flag)
        if name in MANAGED:
            continue  # the plan writes it for the new engine from the pinned options
        if name == "--enable-auto-tool-choice":
            continue  # vLLM's companion of --tool-call-parser: added back below when it is needed
        if name in SHARED:
            new = name
            t.carried.append(name)
        elif name in table:
            new = table[name]
            t.carried.append(f"{name} as {new}")
        else:
            t.dropped.append(name)
            continue
        has_key = has_key or new == "--api-key"
        if value is None:
            t.args.append(new)
        else:
            t.args += [f"{new}={value}"] if eq else [new, value]
    if to == "vllm" and "--tool-call-parser" in [f for f, _, _ in _flags(t.args)]:
        t.args.append("--enable-auto-tool-choice")  # vLLM serves tool calls only with both
    key = (env or {}).get("VLLM_API_KEY")
    if frm == "vllm" and to == "sglang" and key and not has_key:
        t.args += ["--api-key", key]
        t.carried.append("VLLM_API_KEY as --api-key")
    return t


def api_key_of(opts: PlanOptions | None) -> str | None:
    """The key the endpoint demands (--api-key, or VLLM_API_KEY for vLLM), so readiness checks can send it."""
    if opts is None:
        return None
    for flag, value, _ in _flags(opts.extra_args):
        if flag == "--api-key" and value:
            return value
    return opts.env.get("VLLM_API_KEY") or None if opts.engine == "vllm" else None


def pivot_notes(opts: PlanOptions, to: str) -> list[str]:
    """What the confirmation says about the user's flags: what is carried over and what cannot be."""
    if to == opts.engine:
        return []
    t = translate_args(opts.extra_args, opts.engine, to, opts.env)
    name = ENGINE_NAMES.get(to, to)
    notes = []
    if t.dropped:
        notes.append(f"not carried over to {name} (no equivalent): {', '.join(t.dropped)}")
    if t.carried:
        notes.append(f"carried over to {name}: {', '.join(t.carried)}")
    return notes


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
