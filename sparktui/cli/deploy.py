"""`sparktui launch | stop | pivot | redeploy | logs`, and the `deployments` section of `status`.

Each command drives the core Deployer; a Printer turns its events into node-coloured lines. What
stops and what starts is shown and confirmed first (unless --yes): these commands remove containers.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
from dataclasses import asdict

from rich.text import Text

from ..core import argcheck
from ..core.config import Config
from ..core.deploy import (DeployError, Deployer, DeploymentExists, LogFollower, LogLine, find_all,
                           inventory_planner, summarize)
from ..core.deploy.options import read_model_config
from ..core.deploy.orchestrator import READY_TIMEOUT_S
from ..core.diagnose import Milestone, Problem, ProblemCleared
from ..core.engines import ENGINES
from ..core.engines.common import safe_name
from ..core.events import DeploymentChanged, EventBus, LaunchStep, LogLines
from ..core.plan import Plan, make_plan
from ..core.ssh import Cluster
from . import check
from .common import (CliExit, add_config_arg, add_json_arg, checked, confirm, console, err_console, get_config,
                     journal, print_json)
from .plan import add_plan_args, options_from_args

NODE_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
PREFLIGHT_TIMEOUT = 30.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("launch", help="start the engine on every node (preflight first), optionally until ready")
    add_config_arg(p)
    add_plan_args(p)
    _wait_args(p)
    p.add_argument("--yes", "-y", action="store_true", help="replace a running deployment without asking")
    p.add_argument("--no-preflight", action="store_true", help="skip the rendezvous check before launching")
    p.add_argument("--force", action="store_true", help="launch even when the preflight check fails")
    add_json_arg(p)
    p.set_defaults(func=cmd_launch)

    p = sub.add_parser("stop", help="stop and remove this deployment's containers (only those with its labels)")
    add_config_arg(p)
    _deployment_arg(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    add_json_arg(p)
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("pivot", help="stop, then launch the other engine with the same model, TP/PP and network")
    add_config_arg(p)
    _deployment_arg(p)
    p.add_argument("--to", choices=sorted(ENGINES), help="engine to switch to (default: the other one)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    _wait_args(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_pivot)

    p = sub.add_parser("redeploy", help="stop, then launch again with the same options")
    add_config_arg(p)
    _deployment_arg(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    _wait_args(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_redeploy)

    p = sub.add_parser("logs", help="the engine containers' output (all nodes, or one)")
    add_config_arg(p)
    _deployment_arg(p)
    p.add_argument("node", nargs="?", metavar="NODE", help="only this node")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines (resumes after a dropped link)")
    p.add_argument("--since", metavar="T", type=checked(argcheck.docker_since),
                   help="from this time on (docker's --since: RFC3339, unix time or 10m)")
    p.add_argument("--timestamps", "-t", action="store_true", help="show docker's timestamps")
    add_json_arg(p)
    p.set_defaults(func=cmd_logs)

    check.STATUS_SECTIONS["deployments"] = deployments_section


def _deployment_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--deployment", help="deployment name (default: the cluster name)")


def _wait_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true",
                   help="follow the logs until the endpoint answers (exit 0) or a problem shows (exit 1)")
    p.add_argument("--timeout", type=checked(argcheck.seconds), metavar="S",
                   help=f"with --wait: seconds to wait for the endpoint (default {READY_TIMEOUT_S:g})")


async def deployments_section(cluster: Cluster, config: Config) -> list[dict]:
    """Every sparktui deployment found on the nodes, for `sparktui status`."""
    return summarize(await find_all(cluster, None))


# ---- printing ---------------------------------------------------------------------------------

class Printer:
    """Deployment events as lines: node-coloured log lines, steps, milestones, problems with hints."""

    def __init__(self, config: Config, quiet: bool = False, lines: bool = True):
        self.quiet = quiet  # --json: nothing but the final document
        self.lines = lines
        self.colours = {n.name: NODE_COLOURS[i % len(NODE_COLOURS)] for i, n in enumerate(config.nodes)}
        self.width = max((len(n.name) for n in config.nodes), default=4)
        self.steps: list[dict] = []

    def node(self, name: str | None) -> Text:
        name = name or "-"
        return Text(name.ljust(self.width), style=f"bold {self.colours.get(name, 'white')}")

    def __call__(self, e) -> None:
        if isinstance(e, LaunchStep):
            self.steps.append(asdict(e))
        if self.quiet:
            return
        if isinstance(e, LogLines):
            if self.lines:
                for ln in e.lines:
                    console.print(Text.assemble(self.node(e.node), " │ ", ln), soft_wrap=True)
        elif isinstance(e, LaunchStep):
            style = {"failed": "red", "skipped": "dim", "done": "green", "waiting": "yellow"}.get(e.state, "")
            if e.state != "running":
                console.print(Text.assemble(f"[{e.index + 1}/{e.total}] ", self.node(e.node),
                                            f" {e.description}: ", (e.state, style),
                                            (f" ({e.detail})" if e.detail and e.state != "done" else "", "dim")))
        elif isinstance(e, Milestone):
            data = ", ".join(f"{k} {v}" for k, v in e.data.items())
            console.print(Text.assemble("  ✓ ", self.node(e.node), " ", (e.kind, "bold"), f" {data}" if data else ""))
        elif isinstance(e, Problem):
            print_problem(e)
        elif isinstance(e, ProblemCleared):
            console.print(Text(f"  (withdrawn: {e.problem.kind} on {e.problem.node}: {e.reason})", style="dim"))
        elif isinstance(e, DeploymentChanged) and e.state not in ("failed", "hung"):  # the outcome says those
            console.print(Text.assemble(("deployment ", "bold"), e.id, " ", (e.state, _state_style(e.state)),
                                        f" — {e.detail}" if e.detail else ""))


def _state_style(state: str) -> str:
    return {"ready": "bold green", "failed": "bold red", "hung": "bold red", "stopped": "dim"}.get(state, "bold")


def print_problem(p: Problem) -> None:
    where = f" on {p.node}" if p.node else ""
    console.print(Text.assemble(("✗ ", "bold red"), (p.kind, "bold red"), where, ": ", p.message))
    if p.hint:
        console.print(Text.assemble(("  hint: ", "yellow"), p.hint))


def result_doc(d: Deployer, printer: Printer, extra: dict | None = None) -> dict:
    cur = d.current
    return {
        "deployment": d.name,
        "engine": cur.engine if cur else None,
        "mode": cur.mode if cur else None,
        "plan_id": cur.plan_id if cur else None,
        "state": d.state,
        "detail": d.detail,
        "endpoint": d.endpoint if d.state == "ready" else None,
        "check": asdict(d.check) if d.check else None,
        "problems": [p.to_json() for p in d.problems],
        "milestones": [m.to_json() for m in d.milestones],
        "steps": printer.steps,
        "warnings": list(d.warnings),
        **(extra or {}),
    }


def print_outcome(d: Deployer) -> None:
    if d.state == "ready" and d.check:
        c = d.check
        rate = f", {c.tokens_per_s:.1f} tok/s" if c.tokens_per_s else ""
        console.print(Text.assemble(("ready: ", "bold green"), c.endpoint, f"  (model {c.model})"))
        console.print(f"  chat completion: {c.latency_s:.2f} s, {c.completion_tokens} tokens{rate}", markup=False)
        console.print(f"  from this machine now: {c.local} (the SSH forward lasts while sparktui runs)", markup=False)
    elif d.state in ("failed", "hung"):
        console.print(Text.assemble((f"{d.state}: ", "bold red"), d.detail))
        if d.state == "hung" and d.current and d.current.engine == "sglang":
            console.print("  next: sparktui pivot --to vllm (vLLM with Ray rendezvous differently)", markup=False)
    for w in d.warnings:
        console.print(Text.assemble(("warning: ", "yellow"), w))


# ---- shared flow ------------------------------------------------------------------------------

def _deployer(cluster: Cluster, config: Config, bus: EventBus, args: argparse.Namespace,
              deployment: str | None = None) -> Deployer:
    timeout = getattr(args, "timeout", None)
    if timeout is not None and not timeout > 0:
        raise CliExit(2, f"--timeout must be positive (got {timeout:g})")
    return Deployer(cluster, config, bus, deployment=deployment or getattr(args, "deployment", None),
                    planner=inventory_planner(cluster, config), ready_timeout=timeout or READY_TIMEOUT_S)


def _what_runs(found) -> list[str]:
    return [f"{f.node}: {c.name} ({c.labels.get('sparktui.engine', '?')}, {c.state})"
            for f in found.values() for c in f.containers]


def _what_starts(plan: Plan) -> list[str]:
    return [f"{n.name}: {n.container} ({plan.engine} {plan.mode}, rank {n.rank} {n.role})" for n in plan.nodes]


def _ask(title: str, stops: list[str], starts: list[str], yes: bool, notes: list[str] = ()) -> None:
    """Say what stops and starts where (and what a pivot carries over); exit 1 unless confirmed."""
    if notes:  # said even with --yes: what a pivot dropped must never pass silently
        err_console.print("\n".join(f"note: {n}" for n in notes), markup=False)
    if not yes:
        lines = [title]
        if stops:
            lines += ["  stops and removes:"] + [f"    {s}" for s in stops]
        if starts:
            lines += ["  starts:"] + [f"    {s}" for s in starts]
        err_console.print("\n".join(lines), markup=False)
    if not confirm("go ahead?", yes):
        raise CliExit(1, "nothing changed")


async def _finish(d: Deployer, printer: Printer, args: argparse.Namespace, extra: dict | None = None) -> int:
    """After a launch: wait when asked, print the outcome, exit 0 (ready or launched) or 1 (a problem)."""
    if args.wait and d.state not in ("failed",):
        await d.wait(d.ready_timeout + 60, until=("ready", "failed", "hung"))  # readiness has its own deadline
    if args.json:
        print_json(result_doc(d, printer, extra))
    else:
        if not args.wait and d.state not in ("failed", "hung"):
            console.print(f"launched {d.name}; `sparktui logs -f` follows it, `sparktui status` shows it", markup=False)
        print_outcome(d)
    return 0 if d.state not in ("failed", "hung") and (d.state == "ready" or not args.wait) else 1


async def _preflight(cluster: Cluster, config: Config, plan: Plan, subnets, args) -> dict | None:
    """Run the rendezvous check when this build has it; exit 1 on failure unless --force."""
    if args.no_preflight:
        return None
    try:
        mod = importlib.import_module("sparktui.core.preflight")
    except ModuleNotFoundError as e:
        if e.name in ("sparktui.core.preflight",):
            return None
        raise
    if not args.json:
        err_console.print(f"preflight: checking the rendezvous at {plan.head_ip} on {plan.subnet}...", markup=False)
    try:
        verdict = await mod.run_preflight(cluster, config, plan, PREFLIGHT_TIMEOUT, subnets=subnets)
    except Exception as e:  # noqa: BLE001 - the check's own refusal (PreflightError) or a node lost meanwhile
        doc = {"ok": False, "error": str(e)}
        summary = f"preflight could not run: {e}"
    else:
        doc = verdict.to_json()
        summary = verdict.summary()
        if verdict.ok:
            if not args.json:
                console.print(summary, markup=False)
            return doc
    if args.force:
        if not args.json:
            console.print(summary + "\n(--force: launching anyway)", markup=False)
        return doc
    if args.json:
        print_json({"deployment": plan.deployment, "state": "not started", "preflight": doc})
        raise CliExit(1)
    raise CliExit(1, summary + "\n(fix it, or pass --force to launch anyway)")


# ---- commands ---------------------------------------------------------------------------------

async def cmd_launch(args: argparse.Namespace) -> int:
    config = get_config(args)
    opts, notes = options_from_args(args, config)
    from ..core.inventory import take_inventory

    bus = EventBus()
    printer = Printer(config, quiet=args.json)
    bus.subscribe(printer)
    async with Cluster(config, journal=journal()) as cluster:
        inv = await take_inventory(cluster, config)
        opts.model_config = await read_model_config(cluster, config, opts.model_path or config.model.path)
        plan = make_plan(config, inv.facts, inv.subnets, opts)
        plan.warnings[:0] = notes
        if not plan.ok:
            if args.json:
                print_json({"deployment": plan.deployment, "state": "not started", "errors": plan.errors,
                            "warnings": plan.warnings})
                return 1
            raise CliExit(1, "the plan has errors:\n" + "\n".join(f"  {e}" for e in plan.errors))
        if not args.json:
            for w in plan.warnings:
                console.print(Text.assemble(("warning: ", "yellow"), w))
        d = _deployer(cluster, config, bus, args, plan.deployment)
        try:
            found = await d.existing()
            down = [f"{f.node}: {f.error}" for f in found.values() if f.error]
            if down:
                raise CliExit(1, "cannot tell what already runs: " + "; ".join(down))
            ours = [c for f in found.values() for c in f.containers]
            resuming = bool(ours) and all(c.state == "running" and c.labels.get("sparktui.plan") == plan.plan_id
                                          for c in ours)
            running_other = any(c.state == "running" for c in ours) and not resuming
            extra: dict = {"plan_id": plan.plan_id}
            if not resuming:
                extra["preflight"] = await _preflight(cluster, config, plan, inv.subnets, args)
            elif not args.json:
                console.print(f"{plan.deployment} already runs this plan ({plan.plan_id}): resuming, "
                              f"nothing is started twice", markup=False)
            if running_other:
                _ask(f"deployment {plan.deployment} is running another plan:", _what_runs(found),
                     _what_starts(plan), args.yes)
            await d.launch(plan, opts, if_exists="replace" if running_other else "ask")
            return await _finish(d, printer, args, extra)
        except DeploymentExists as e:  # something appeared between the look and the launch
            raise CliExit(1, f"{e}:\n" + "\n".join(f"  {x}" for x in e.lines())) from None
        except DeployError as e:
            raise CliExit(1, str(e)) from None
        finally:
            await d.close()


async def cmd_stop(args: argparse.Namespace) -> int:
    config = get_config(args)
    bus = EventBus()
    printer = Printer(config, quiet=args.json)
    bus.subscribe(printer)
    async with Cluster(config, journal=journal()) as cluster:
        d = _deployer(cluster, config, bus, args)
        found = await d.existing()
        down = [f"{f.node}: {f.error}" for f in found.values() if f.error]
        runs = _what_runs(found)
        if not runs:
            if args.json:
                print_json({"deployment": d.name, "removed": 0, "unreachable": down})
            else:
                console.print(f"nothing to stop: no container of {d.name}" + (f" (could not ask {'; '.join(down)})"
                                                                             if down else ""), markup=False)
            return 1 if down else 0
        _ask(f"stop deployment {d.name}?", runs, [], args.yes)
        try:
            removed = await d.stop()
        except DeployError as e:
            raise CliExit(1, str(e)) from None
    if args.json:
        print_json({"deployment": d.name, "removed": removed, "containers": runs, "unreachable": down})
    elif down:
        err_console.print("not asked (unreachable): " + "; ".join(down), markup=False)
    return 1 if down else 0


async def _switch(args: argparse.Namespace, pivot: bool) -> int:
    config = get_config(args)
    bus = EventBus()
    printer = Printer(config, quiet=args.json)
    bus.subscribe(printer)
    async with Cluster(config, journal=journal()) as cluster:
        d = _deployer(cluster, config, bus, args)
        try:
            opts, plan = await (d.plan_pivot(args.to) if pivot else d.plan_redeploy())
            if not plan.ok:
                raise CliExit(1, "the new plan has errors:\n" + "\n".join(f"  {e}" for e in plan.errors))
            found = await d.existing()
            what = f"pivot {d.name} to {plan.engine} ({plan.mode})" if pivot else f"redeploy {d.name}"
            _ask(f"{what}, TP {plan.tp} x PP {plan.pp} on {plan.subnet}:", _what_runs(found), _what_starts(plan),
                 args.yes, [w for w in plan.warnings if "carried over to" in w])
            await d.relaunch(plan, opts)
            return await _finish(d, printer, args, {"plan_id": plan.plan_id})
        except DeployError as e:
            raise CliExit(1, str(e)) from None
        finally:
            await d.close()


async def cmd_pivot(args: argparse.Namespace) -> int:
    return await _switch(args, pivot=True)


async def cmd_redeploy(args: argparse.Namespace) -> int:
    return await _switch(args, pivot=False)


async def cmd_logs(args: argparse.Namespace) -> int:
    config = get_config(args)
    name = safe_name(args.deployment or config.cluster)
    if args.node is not None and args.node not in [n.name for n in config.nodes]:
        raise CliExit(2, f"no node {args.node!r} in the config (nodes: {', '.join(n.name for n in config.nodes)})")
    printer = Printer(config)
    async with Cluster(config, journal=journal()) as cluster:
        found = await find_all(cluster, name, [args.node] if args.node else None)
        down = [f"{f.node}: {f.error}" for f in found.values() if f.error]
        targets = [(f.node, c.name) for f in found.values() for c in f.containers]
        if not targets:
            raise CliExit(1, f"no container of {name}" + (f" ({'; '.join(down)})" if down else ""))

        def show(node: str, container: str, lines: list[LogLine]) -> None:
            for ln in lines:
                if args.json:
                    print_json_line({"node": node, "container": container, "ts": ln.ts, "line": ln.text})
                else:
                    stamp = f"{ln.ts} " if args.timestamps and ln.ts else ""
                    console.print(Text.assemble(printer.node(node), " │ ", stamp, ln.text), soft_wrap=True)

        followers = [LogFollower(cluster[n], c, lambda lines, n=n, c=c: show(n, c, lines), since=args.since,
                                 follow=args.follow) for n, c in targets]
        await asyncio.gather(*(f.run() for f in followers))
    if down:
        err_console.print("not read (unreachable): " + "; ".join(down), markup=False)
    return 1 if down else 0


def print_json_line(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()

