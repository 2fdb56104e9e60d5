"""`sparktui plan`: probe the nodes, then show (or export) exactly what a launch would run, and why not.

The I/O (config, SSH, probes, reading config.json) is in cmd_plan; turning arguments into options
and a plan into text are plain functions, so they are tested with synthetic facts.
"""

from __future__ import annotations

import argparse

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..core.config.config import Config
from ..core.engines import DEFAULT_ENGINE, ENGINES, get_engine
from ..core.plan.export import write_export
from ..core.plan.fit import gib
from ..core.network.paths import describe_paths
from ..core.plan.plan import Plan, PlanOptions
from ..core.plan.sizing import parse_bytes
from ..core.recipes.recipe import RecipeError, apply_recipe, load_recipe
from .common import CliExit, add_config_arg, console, get_config, journal, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="show the per-node commands a launch would run, with checks and a fit estimate")
    add_config_arg(p)
    add_plan_args(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--offline",
        action="store_true",
        help="plan without connecting, from the facts the last probe of each node kept (says from when)",
    )
    src.add_argument(
        "--facts",
        metavar="FILE",
        help="plan without connecting, from a facts file such as a saved `sparktui check --json`",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the plan as JSON")
    out.add_argument("--export", metavar="DIR", help="write one shell script per node and README.txt into DIR")
    p.set_defaults(func=cmd_plan)


# every engine's modes, the multi-mode ones' first ("ray", "native")
MODES = list(dict.fromkeys(m for e in sorted(ENGINES.values(), key=lambda e: -len(e.modes)) for m in e.modes))


def add_plan_args(p: argparse.ArgumentParser) -> None:
    """The plan options, shared by every command that builds a plan (plan, preflight, launch)."""
    p.add_argument(
        "--engine", choices=sorted(ENGINES), help=f"inference engine (default: {DEFAULT_ENGINE}, or the recipe's)"
    )
    p.add_argument(
        "--mode", choices=MODES, help="vLLM multi-node mode (default: ray, or native where the image has no Ray)"
    )
    p.add_argument("--tp", type=int, help="tensor parallel size (default: GPUs per node x nodes)")
    p.add_argument("--pp", type=int, help="pipeline parallel size (default: 1)")
    p.add_argument("--nodes", metavar="A,B,...", help="nodes in rank order, head first (default: all, head first)")
    p.add_argument(
        "--iface", metavar="SUBNET|IFNAME|IP", help="rendezvous network (default: the best subnet joining all)"
    )
    p.add_argument("--image", help="container image (default: images.<engine> in the config)")
    p.add_argument("--port", type=int, help="HTTP port on the head")
    p.add_argument("--dist-port", type=int, help="rendezvous port (--dist-init-addr / --master-port)")
    p.add_argument("--ray-port", type=int, help="Ray GCS port (vLLM ray mode)")
    p.add_argument(
        "--mem-fraction",
        type=float,
        help="SGLang --mem-fraction-static (weights + KV cache) / vLLM --gpu-memory-utilization (weights, "
        "activations, KV cache); default: engine.mem_fraction, else 0.75 SGLang / 0.8 vLLM",
    )
    p.add_argument(
        "--max-model-len",
        type=_length,
        metavar="N|auto",
        help="context length cap; auto lets the engine fit the longest the KV cache holds (vLLM 0.14+)",
    )
    p.add_argument(
        "--kv-cache-bytes",
        type=_size,
        metavar="BYTES",
        help="size the KV cache in bytes, e.g. 20G (vLLM 0.10.2+ --kv-cache-memory-bytes; the memory "
        "fraction then only bounds the rest)",
    )
    p.add_argument("--served-model-name", help="model name in the API (default: model.name)")
    p.add_argument("--deployment", help="deployment name in container names (default: the cluster name)")
    p.add_argument(
        "--arg",
        dest="extra_args",
        action="append",
        default=[],
        metavar="ARG",
        help="extra engine argument, repeatable (use --arg=--flag for flags)",
    )
    p.add_argument(
        "--env",
        dest="extra_env",
        action="append",
        default=[],
        metavar="K=V",
        help="extra container environment, repeatable",
    )
    p.add_argument(
        "--recipe",
        metavar="FILE",
        help="a recipe to start from: sparkrun's, or one of NVIDIA's Local AI Inference Recipes",
    )


def _length(text: str) -> int | str:
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of tokens or auto (got {text!r})") from None


def _size(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(name: str, v: int | float | str | None) -> None:
    if v is not None and v <= 0:
        raise CliExit(2, f"{name} must be positive (got {v})")


def options_from_args(args: argparse.Namespace, config: Config) -> tuple[PlanOptions, list[str]]:
    """Plan options from the command line (and the recipe under them); bad input exits 2."""
    auto_len = args.max_model_len == "auto"
    max_len = None if auto_len else args.max_model_len
    for name in ("tp", "pp", "port", "dist_port", "ray_port", "mem_fraction", "kv_cache_bytes"):
        _positive("--" + name.replace("_", "-"), getattr(args, name, None))
    _positive("--max-model-len", max_len)
    for name in ("port", "dist_port", "ray_port"):
        if (getattr(args, name, None) or 0) > 65535:
            raise CliExit(2, f"--{name.replace('_', '-')} must be a port 1-65535 (got {getattr(args, name)})")
    if args.mem_fraction is not None and not 0 < args.mem_fraction <= 1:  # also nan
        raise CliExit(2, f"--mem-fraction must be above 0 and at most 1 (got {args.mem_fraction})")
    env = {}
    for item in args.extra_env:
        k, eq, v = item.partition("=")
        if not eq or not k:
            raise CliExit(2, f"--env takes NAME=VALUE (got {item!r})")
        env[k] = v
    nodes = [n.strip() for n in args.nodes.split(",") if n.strip()] if args.nodes else None
    if args.mode and len(get_engine(args.engine or DEFAULT_ENGINE).modes) == 1 and not args.recipe:
        multi = " or ".join(e.name for e in ENGINES.values() if len(e.modes) > 1)
        raise CliExit(2, f"--mode applies to --engine {multi} only")
    opts = PlanOptions(
        engine=args.engine or DEFAULT_ENGINE,
        mode=args.mode,
        image=args.image,
        tp=args.tp,
        pp=args.pp,
        nodes=nodes,
        rendezvous=args.iface,
        dist_port=args.dist_port,
        port=args.port,
        ray_port=args.ray_port,
        mem_fraction=args.mem_fraction,
        max_model_len=max_len,
        max_model_len_auto=auto_len,
        kv_cache_bytes=args.kv_cache_bytes,
        served_model_name=args.served_model_name,
        extra_args=list(args.extra_args),
        env=env,
        deployment=args.deployment,
    )
    notes: list[str] = []
    if args.recipe:
        try:
            recipe = load_recipe(args.recipe)
        except RecipeError as e:
            raise CliExit(2, str(e)) from None
        if recipe.errors:  # a field of the wrong kind is bad input: said up front, nothing half-applied
            raise CliExit(2, "\n".join(recipe.errors))
        count = len(nodes) if nodes else len(config.nodes)
        opts, found = apply_recipe(recipe, opts, config.model.path, count, engine_given=bool(args.engine))
        notes = [f"recipe: {w}" for w in found]
    return opts, notes


async def cmd_plan(args: argparse.Namespace) -> int:
    config = get_config(args)
    opts, notes = options_from_args(args, config)
    if getattr(args, "offline", False) or getattr(args, "facts", None):
        plan = plan_without_nodes(config, opts, args.facts)
    else:
        from ..core.deploy.operations import Operations  # the probe layer, only needed here
        from ..core.state.events import EventBus
        from ..core.remote.ssh import Cluster

        async with Cluster(config, journal=journal()) as cluster:
            ops = Operations(cluster, config, EventBus())  # the planner `launch` and the TUI use
            plan = await ops.plan(opts, last_subnet=None if opts.rendezvous else await ops.last_subnet(opts.deployment))
    plan.warnings[:0] = notes
    if args.json:
        doc = plan.to_json()
        s = plan.support or {}
        if s.get("status") == "unsupported" and plan.errors and plan.errors[0].startswith(s.get("image") or "\0"):
            doc["fix"] = s.get("fix")  # the refusal's way out: the image release that loads the model
        print_json(doc)
    elif args.export:
        for path in write_export(plan, args.export):
            console.print(str(path), markup=False)
    else:
        console.print(render_plan(plan))
    return 0 if plan.ok else 1


def plan_without_nodes(config: Config, opts: PlanOptions, facts_file: str | None) -> Plan:
    """A plan from kept facts (--offline) or a facts file (--facts): no node is asked. The model's
    config.json is not read (it lives on the nodes), so TP is not checked against its heads."""
    from ..core.nodes import facts_store
    from ..core.nodes.inventory import analyse
    from ..core.plan.plan import make_plan

    names = [n.name for n in config.nodes]
    hosts = {n.name: n.host for n in config.nodes}
    try:
        saved = (
            facts_store.load_file(facts_file, names, hosts)
            if facts_file
            else facts_store.load_last(config.cluster, names, hosts)
        )
    except facts_store.FactsFileError as e:
        raise CliExit(2 if facts_file else 1, str(e)) from None
    inv = analyse(config, saved.facts)
    plan = make_plan(config, saved.facts, inv.subnets, opts)
    plan.warnings[:0] = [
        f"offline: planned from {saved.source}, not from the nodes now: {saved.when()}; "
        f"the model's config.json was not read"
    ]
    return plan


def render_plan(plan: Plan) -> Group:
    """The plan for people: summary, launch order, per-node env and commands, fit, warnings, errors."""
    parts: list = []
    head = Text.assemble(
        ("plan ", "bold"),
        (plan.plan_id or "-", "cyan"),
        f"  {plan.engine} ({plan.mode})  ",
        f"TP {plan.tp} x PP {plan.pp}  deployment {plan.deployment}",
    )
    parts.append(head)
    parts.append(Text(f"model {plan.model_path} as {plan.served_model_name or '-'}, image {plan.image}"))
    if plan.engine_note:
        parts.append(Text(f"engine {plan.engine_note}"))
    parts.append(
        Text(
            f"rendezvous {plan.subnet or '?'} head {plan.head_ip or '?'}:{plan.rendezvous_port}, HTTP port {plan.port}"
        )
    )
    if plan.fabric.get("paths"):
        parts.append(Text(describe_paths(plan.fabric["paths"], plan.nodes[0].name if plan.nodes else None)))
    if plan.collectives_line:
        parts.append(Text(plan.collectives_line))
    if plan.steps:
        order = Table(title="launch order", title_justify="left", show_edge=False)
        for col in ("#", "node", "kind", "what"):
            order.add_column(col)
        for i, s in enumerate(plan.steps, 1):
            order.add_row(str(i), Text(s.node), Text(s.kind), Text(s.description))  # node data: never markup
        parts.append(order)
    for n in plan.nodes:
        env = Table(show_header=False, show_edge=False, box=None)
        env.add_column(style="dim")
        env.add_column()
        for k, v in n.env.items():
            env.add_row(Text(k), Text(v))
        if plan.ok:
            cmds = [Text(c, style="green") for c in n.commands]
        else:  # commented out and said so: a copied line must not run a plan that was refused
            cmds = [Text("# NOT RUNNABLE: the plan has errors (below)", style="bold red")] * bool(n.commands) + [
                Text("# " + c, style="dim") for c in n.commands
            ]
        cmds = cmds or [Text("(no commands: fix the errors)", style="dim")]
        data = n.env.get("NCCL_IB_HCA") or "sockets"  # what NCCL_IB_HCA names, not the bootstrap interface
        title = f"{n.name}  rank {n.rank} {n.role}  bootstrap {n.iface or '?'} {n.ip or '?'}  data {data}"
        parts.append(Panel(Group(env, Text(""), *cmds), title=Text(title), title_align="left"))
    if plan.fit is not None:
        f = plan.fit
        style = "red" if f.errors else ("yellow" if f.warnings else "green")
        detail = (
            f.summary()
            if f.known
            else f"fit unknown (weights {gib(f.weights_per_gpu)}, memory {gib(f.memory_per_gpu)})"
        )
        parts.append(Text("fit: " + detail, style=style))
    for n in plan.notes:
        parts.append(Text("note: " + n, style="dim"))
    for w in plan.warnings:
        parts.append(Text("warning: " + w, style="yellow"))
    for e in plan.errors:
        parts.append(Text("error: " + e, style="red"))
    if plan.ok:
        parts.append(Text("plan is valid", style="bold green"))
    return Group(*parts)
