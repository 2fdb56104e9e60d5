"""`sparktui preflight`: the plan's rendezvous checked on every node, in the plan's image, in well under a
minute — before an engine loads the weights and only then finds out it cannot reach the head."""

from __future__ import annotations

import argparse

from ..core.config import argcheck
from ..core.deploy.operations import Choices, Operations
from ..core.state.events import EventBus, PreflightNode, PreflightStage
from ..core.state.words import check_words
from ..core.preflight import DEFAULT_START_WINDOW, DEFAULT_TIMEOUT, NodeResult, PreflightError, checkable
from ..core.remote.ssh import Cluster
from .common import (
    CliExit,
    add_config_arg,
    add_json_arg,
    checked,
    console,
    err_console,
    get_config,
    journal,
    print_json,
)
from .plan import add_plan_args, options_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preflight", help="check the plan's rendezvous on every node before loading the model")
    add_config_arg(p)
    add_plan_args(p)
    p.add_argument(
        "--timeout",
        type=checked(argcheck.seconds),
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"seconds the check may take on the nodes, from the moment it runs there (default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument(
        "--start-window",
        type=checked(argcheck.seconds, "--start-window"),
        default=DEFAULT_START_WINDOW,
        metavar="S",
        help="seconds each node's check container may take to start before the check runs: a large image "
        f"on slow storage can take minutes (default {DEFAULT_START_WINDOW:g})",
    )
    p.add_argument(
        "--via",
        choices=["auto", "nccl", "tcp"],
        default="auto",
        help="auto: NCCL where the image's torch sees a GPU, plain TCP otherwise",
    )
    p.add_argument(
        "--rails",
        action="store_true",
        help="then measure each RDMA half alone with ib_write_bw (perftest), a few seconds each, naming "
        "one that trained at full speed but moves a fraction of it",
    )
    add_json_arg(p)
    p.set_defaults(func=cmd_preflight)


STAGE_WORDS = {"starting": "starting the check container", "rendezvous": "rendezvous"}


def progress(e: object) -> None:
    """A line on stderr per node as its check starts its container, reaches the rendezvous, then ends."""
    if isinstance(e, PreflightStage):
        err_console.print(f"{e.node}: {STAGE_WORDS.get(e.stage, e.stage)}...", markup=False)
    elif isinstance(e, PreflightNode):
        r: NodeResult = e.result
        said = "ok" if r.ok else f"failed ({check_words(r.kind)})"
        err_console.print(f"{r.node}: {said}", markup=False)


async def cmd_preflight(args: argparse.Namespace) -> int:
    config = get_config(args)
    if not args.timeout > 0:
        raise CliExit(2, f"--timeout must be positive (got {args.timeout:g})")
    if not args.start_window > 0:
        raise CliExit(2, f"--start-window must be positive (got {args.start_window:g})")
    opts, notes = options_from_args(args, config)
    async with Cluster(config, journal=journal()) as cluster:
        ops = Operations(cluster, config, EventBus())
        p = await ops.prepare_check(Choices(options=opts, notes=notes))
        plan = p.plan
        assert plan is not None
        problems = checkable(plan)
        if problems:
            down = [
                f"{n}: {f.error or 'unreachable'}"
                for n, f in (p.inventory.facts if p.inventory else {}).items()
                if not f.reachable and n in [x.name for x in plan.nodes]
            ]
            # A node or the fabric found unusable is a problem found; anything else is input naming no rendezvous.
            found = bool(down) or (plan.subnet is None and not opts.rendezvous)  # the fabric, found unusable
            why = "; ".join(down + plan.errors + problems)
            raise CliExit(1 if found else 2, f"nothing to check: {why}", reason=why)
        if not args.json:
            err_console.print(
                f"checking {len(plan.nodes)} node(s) at {plan.head_ip} on {plan.subnet} in {plan.image} "
                f"(up to {args.start_window:g} s for each container to start, then {args.timeout:g} s)...",
                markup=False,
                soft_wrap=True,
            )
        if not args.json:
            ops.bus.subscribe(progress)
        try:
            verdict = await ops.preflight(
                p, args.timeout, mode=args.via, rails=args.rails, start_window=args.start_window
            )
        except PreflightError as e:
            raise CliExit(2, str(e)) from None
        notes = [w for w in p.warnings]
        plan.errors = list(p.errors)
    if args.json:
        print_json(
            {
                **verdict.to_json(),
                "plan": {
                    "id": plan.plan_id,
                    "engine": plan.engine,
                    "mode": plan.mode,
                    "errors": plan.errors,
                    "warnings": notes,
                },
            }
        )
    else:
        console.print(verdict.summary(), markup=False, highlight=False, soft_wrap=True)
        for e in plan.errors:
            console.print(f"  plan error (not what this checks): {e}", markup=False, soft_wrap=True)
    return 0 if verdict.ok else 1
