"""`sparktui demo`: the whole story on a simulated cluster on this machine (no GPUs, no root).

  sparktui demo [--nodes N] [--scenario {scenarios}] [--speed X] [--keep]   the TUI on the demo
  sparktui demo up [...] [--json]     start the nodes, print the config path, stay in the foreground
                                      until Ctrl-C (or `demo down` from another terminal)
  sparktui demo down [ID]             stop background demos (`demo up`): all of this user's, or the one named;
                                      also removes what demos killed with -9 left behind
`demo --headless` is `demo up`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from ..demo.configfile import SCENARIOS, STORIES
from .common import CliExit, console, err_console, print_json

SCENARIO_HELP = "; ".join(f"{name}: {STORIES[name]}" for name in SCENARIOS)


def _add_options(p: argparse.ArgumentParser, sub: bool = False) -> None:
    # On `demo up` the defaults are left out, so `demo --speed 20 up` keeps the 20 (argparse lets a
    # subcommand's defaults overwrite what the parent parsed).
    d = (lambda v: argparse.SUPPRESS) if sub else (lambda v: v)
    p.add_argument("--nodes", type=int, default=d(2), metavar="N", help="simulated nodes (default 2)")
    p.add_argument("--scenario", choices=tuple(SCENARIOS), default=d("pivot"), help=SCENARIO_HELP)
    p.add_argument(
        "--speed",
        type=float,
        default=d(10.0),
        metavar="X",
        help="how many times faster than real engines the simulated ones run (default 10)",
    )
    p.add_argument("--keep", action="store_true", default=d(False), help="keep the demo's directory when it ends")
    p.add_argument(
        "--no-trust",
        action="store_true",
        default=d(False),
        help="do not set up node-to-node SSH trust (try `sparktui setup trust` yourself)",
    )
    p.add_argument(
        "--model-mb", type=int, default=d(64), metavar="MB", help="real bytes in the demo checkpoint (default 64)"
    )
    p.add_argument(
        "--link-mbps",
        type=float,
        default=d(32.0),
        metavar="MB/s",
        help="pace of copies between nodes, so progress shows (default 32 MB/s)",
    )
    p.add_argument(
        "--stream-mbps",
        type=float,
        default=d(0.0),
        metavar="MB/s",
        help="most one copy stream carries, as one core bounds one rsync over ssh (default 0: only the link)",
    )
    p.add_argument(
        "--layout",
        choices=("fresh", "sync"),
        default=d("fresh"),
        help="fabric as a new Spark has it (fresh: the port's second half down, unaddressed) or as "
        "NVIDIA Sync writes it (sync: each half on a subnet of its own)",
    )
    p.add_argument("--json", action="store_true", default=d(False), help="print machine-readable JSON")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="try sparktui on a simulated cluster on this machine (no GPUs, no root)",
        description=__doc__.format(scenarios="|".join(SCENARIOS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_options(p)
    p.add_argument("--headless", action="store_true", help="no TUI: same as `demo up`")
    inner = p.add_subparsers(dest="demo_command", metavar="up|down")
    up = inner.add_parser(
        "up",
        help="start the simulated nodes, print the config path and stay in the foreground; "
        "Ctrl-C (or `demo down` elsewhere) stops them",
    )
    _add_options(up, sub=True)
    down = inner.add_parser("down", help="stop demos started with `sparktui demo up`")
    down.add_argument(
        "id",
        nargs="?",
        help="the demo's id (default: every `demo up` of this user; "
        "an interactive `sparktui demo` is stopped only when named)",
    )
    down.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print machine-readable JSON")
    p.set_defaults(func=cmd_demo)


def _options(args: argparse.Namespace):
    from ..demo.cluster import DemoOptions
    from ..demo.hardware import MAX_NODES

    if not 1 <= args.nodes <= MAX_NODES:
        raise CliExit(2, f"--nodes must be between 1 and {MAX_NODES}")
    if args.speed <= 0 or args.model_mb < 1 or args.link_mbps <= 0:
        raise CliExit(2, "--speed and --link-mbps must be above 0, --model-mb at least 1")
    return DemoOptions(
        nodes=args.nodes,
        scenario=args.scenario,
        speed=args.speed,
        keep=args.keep,
        trust=not args.no_trust,
        model_bytes=args.model_mb << 20,
        link_mb_per_s=args.link_mbps,
        stream_mb_per_s=max(0.0, getattr(args, "stream_mbps", 0.0)),
        layout=getattr(args, "layout", "fresh"),
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo.errors import DemoError
    from ..demo.sweep import sweep

    command = getattr(args, "demo_command", None)
    try:
        if command == "down":
            return _down(args)
        options = _options(args)
        sweep()  # what earlier demos killed with -9 left in the temp directory
        if command == "up" or args.headless:
            options.background = True
            return asyncio.run(_up(options, args.json))
        return _tui(options, args)
    except DemoError as e:
        raise CliExit(1, f"sparktui demo: {e}") from None


def _describe(summary: dict) -> str:
    speed = summary["speed"]
    lines = [
        f"sparktui demo {summary['id']}: {len(summary['nodes'])} simulated nodes on this machine "
        f"(scenario {summary['scenario']}), running in the foreground until Ctrl-C here "
        "or `sparktui demo down` from another terminal",
        f"the simulated engines run {speed:g}x faster than real ones: their logs count engine time, "
        f'so a "300 s" timeout comes {300 / speed:.3g} s after launch (--speed sets it)',
        f"config: {summary['config']}",
    ]
    for i, n in enumerate(summary["nodes"]):
        holds = "  holds the model" if i == 0 else ""
        lines.append(f"  {n['name']}  ssh {n['host']}:{n['port']}  fabric {n['fabric']}{holds}")
    cfg = summary["config"]
    lines += [
        "try, from another terminal:",
        f"  sparktui --config {cfg} check",
        f"  sparktui --config {cfg} sync model --wait",
        f"  sparktui --config {cfg}            (the TUI on these nodes)",
    ]
    return "\n".join(lines)


async def _up(options, as_json: bool) -> int:
    from ..demo.cluster import DemoCluster

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    async with DemoCluster(options) as demo:
        summary = demo.summary()
        if as_json:
            sys.stdout.write(json.dumps(summary) + "\n")
        else:
            sys.stdout.write(_describe(summary) + "\n")
        sys.stdout.flush()
        await stop.wait()
        if not as_json:
            err_console.print("stopping the simulated nodes ...")
    return 0


def _refuse(args: argparse.Namespace, why: str, fix: str) -> int:
    if args.json:
        print_json({"stopped": [], "failed": [], "error": why, "reason": why, "fix": fix})
    else:
        err_console.print(f"{why}; {fix}", markup=False)
    return 1


def _down(args: argparse.Namespace) -> int:
    from ..demo.registry import ID
    from ..demo.runner import running_demos, stop_demo
    from ..demo.sweep import sweep

    if args.id is not None and not ID.fullmatch(args.id):
        # "" must not mean "every demo": a script's empty variable would stop them all
        return _refuse(
            args,
            f"no demo has the id {args.id!r}",
            "`sparktui demo down` without an id stops every `demo up` of this user",
        )
    sweep()  # directories of demos killed with -9: nothing else would ever remove them
    found = running_demos()
    # Without an id only background demos: an interactive `sparktui demo` belongs to its terminal.
    demos = [d for d in found if d.id == args.id] if args.id else [d for d in found if d.background]
    if not demos:
        if args.json:
            why = f"no running demo with id {args.id}" if args.id else "no demo started with `sparktui demo up` runs"
            print_json(
                {
                    "stopped": [],
                    "failed": [],
                    "error": why,
                    "fix": "`sparktui demo up` starts one"
                    if not found
                    else f"running: {', '.join(d.id for d in found)}; `sparktui demo down ID` stops one",
                }
            )
        else:
            others = (
                ""
                if args.id
                else "".join(
                    f"\n  {d.id}: an interactive `sparktui demo` (pid {d.pid}); `sparktui demo down {d.id}` stops it"
                    for d in found
                )
            )
            err_console.print(
                ("no running demo" + (f" with id {args.id}" if args.id else " started with `sparktui demo up`"))
                + others,
                markup=False,
            )
        return 1
    stopped, failed = [], []
    for d in demos:
        (stopped if stop_demo(d) else failed).append(d.id)
    if args.json:
        print_json({"stopped": stopped, "failed": failed})
    else:
        for i in stopped:
            console.print(f"stopped demo {i}")
        for i in failed:
            err_console.print(f"demo {i} did not stop within a minute")
    return 0 if not failed else 1


def _tui(options, args: argparse.Namespace) -> int:
    from ..core.config.config import load_config
    from ..demo.runner import ThreadedDemo
    from .tui import need_terminal, run_app

    need_terminal("`sparktui demo up` runs the simulated nodes without one")

    try:
        from ..tui.app import SparkApp
    except ImportError as e:
        raise CliExit(1, f"the TUI is not available in this build: {e}; try `sparktui demo up`") from None
    err_console.print("starting the simulated nodes ...")
    runner = ThreadedDemo(options)
    try:
        demo = runner.start()
        app = SparkApp(load_config(demo.config_path), theme=getattr(args, "theme", None))
        app.title = "sparktui DEMO \u2014 simulated cluster"
        app.sub_title = f"{options.nodes} nodes on this machine, scenario {options.scenario}"
        # a terminal closing or `kill` ends the app the normal way and the nodes stop below; if that way
        # is stuck, run_app stops them itself before it exits
        run_app(app, on_forced_exit=runner.stop)
    finally:
        runner.stop()
    err_console.print(
        f"demo ended; config was {runner.cluster.config_path}" if options.keep and runner.cluster.root else "demo ended"
    )
    return 0
