"""`sparktui launch | stop | pivot | redeploy | logs`, and the `deployments` section of `status`.

Each command drives the core Deployer; a Printer turns its events into node-coloured lines. What
stops and what starts is shown and confirmed first (unless --yes): these commands remove containers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import signal
import sys
import time
from dataclasses import asdict

import humanize

from rich.text import Text

from ..core.config import argcheck
from ..core.config.config import Config
from ..core.deploy import (
    DeployError,
    Deployer,
    DeploymentExists,
    LogBatch,
    LogFollower,
    find_all,
    load_record,
    summarize,
)
from ..core.deploy import stopmark
from ..core.deploy.lock import LockHeld
from ..core.deploy.operations import PREFLIGHT_TIMEOUT, Choices, Op, Operations, Prepared, Preview
from ..core.deploy.orchestrator import READY_TIMEOUT_S
from ..core.diagnosis.diagnose import Milestone, Problem, ProblemCleared
from ..core.engines import ENGINES, find_engine, label
from ..core.engines.common import safe_name
from ..core.state.events import DeploymentChanged, EventBus, LaunchStep, LogLines
from ..core.memory.status import memory_json
from ..core.remote.ssh import Cluster
from ..core.state.statefile import StateFileError
from ..core.state.states import State
from ..core.state.words import milestone_words, problem_words
from . import check
from .preflight import progress as preflight_progress
from .common import (
    CliExit,
    add_config_arg,
    add_json_arg,
    checked,
    confirm,
    console,
    err_console,
    get_config,
    journal,
    not_confirmed,
    print_json,
)
from .plan import add_plan_args, options_from_args

NODE_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("launch", help="start the engine on every node (preflight first), optionally until ready")
    add_config_arg(p)
    add_plan_args(p)
    _wait_args(p)
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="replace a running deployment, and remove stale containers the preflight names, without asking",
    )
    p.add_argument("--no-preflight", action="store_true", help="skip the rendezvous check before launching")
    p.add_argument("--force", action="store_true", help="launch even when the preflight check fails")
    _break_lock_arg(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="prepare and check only: the plan, its checks and what would stop and start; start nothing",
    )
    add_json_arg(p)
    p.set_defaults(func=cmd_launch)

    p = sub.add_parser("stop", help="stop and remove this deployment's containers (only those with its labels)")
    add_config_arg(p)
    _deployment_arg(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    _break_lock_arg(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_stop)

    cycle = [label(n) for n, e in ENGINES.items() if e.in_pivot_cycle] or [label(n) for n in ENGINES]
    p = sub.add_parser("pivot", help="stop, then launch the other engine with the same model, TP/PP and network")
    add_config_arg(p)
    _deployment_arg(p)
    p.add_argument(
        "--to",
        choices=sorted(ENGINES),
        help=f"engine to switch to (default: the next of {' -> '.join(cycle)}, round; from another engine, {cycle[0]})",
    )
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    _break_lock_arg(p)
    _wait_args(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_pivot)

    p = sub.add_parser("redeploy", help="stop, then launch again with the same options")
    add_config_arg(p)
    _deployment_arg(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    _break_lock_arg(p)
    _wait_args(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_redeploy)

    p = sub.add_parser("logs", help="the engine containers' output (all nodes, or one)")
    add_config_arg(p)
    _deployment_arg(p)
    p.add_argument("node", nargs="?", metavar="NODE", help="only this node")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines (resumes after a dropped link)")
    p.add_argument(
        "--since",
        metavar="T",
        type=checked(argcheck.docker_since),
        help="from this time on (docker's --since: RFC3339, unix time or 10m)",
    )
    p.add_argument("--timestamps", "-t", action="store_true", help="show docker's timestamps")
    add_json_arg(p)
    p.set_defaults(func=cmd_logs)

    check.STATUS_SECTIONS["deployments"] = deployments_section


def _deployment_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--deployment", help="deployment name (default: the cluster name)")


def _break_lock_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--break-lock",
        action="store_true",
        help="when another sparktui holds this deployment's lock: show who, and break it once confirmed",
    )


def _wait_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        action="store_true",
        help="show progress (steps, milestones, problems) until the endpoint answers (exit 0) or a "
        "problem shows (exit 1); `sparktui logs` has the engine's own log",
    )
    p.add_argument(
        "--timeout",
        type=checked(argcheck.seconds),
        metavar="S",
        help=f"with --wait: seconds to wait for the endpoint (default {READY_TIMEOUT_S:g})",
    )


async def deployments_section(cluster: Cluster, config: Config) -> list[dict]:
    """Every sparktui deployment found on the nodes, with its endpoint and health, for `sparktui status`."""
    from ..core.deploy.health import health_of

    from ..core.memory.status import memory_words, read_all

    out = summarize(await find_all(cluster, None))
    await health_of(cluster, config, out)
    head = cluster.nodes.get(config.head.name)
    shown = {d.get("name") for d in out}
    for g in (await stopmark.guarded(head)) if head is not None and head.connected else []:
        if g["name"] in shown:
            continue  # launched again since, or its removal failed: the containers say more
        when = humanize.naturaltime(time.time() - g["at"]) if g["at"] else "earlier"
        out.append(
            {
                "name": g["name"],
                "state": "failed",
                "stopped_by": "memory guard",
                "reason": g["reason"],
                "at": g["at"],
                "containers": [],
                "summary": f"{g['name']} failed: the memory guard stopped it {when}: {g['reason']} "
                f"(a launch or `sparktui stop` clears this line)",
            }
        )
    nodes = sorted({c["node"] for d in out for c in d.get("containers", [])})
    mem = await read_all(cluster, config.memory, nodes)  # one reading per node, shared by its deployments
    for d in out:
        if "containers" not in d:
            continue
        d["memory"] = {n: mem[n] for n in sorted({c["node"] for c in d["containers"]})}
        for n, m in d["memory"].items():
            d["summary"] += "\n    " + memory_words(n, m)
    return out


# ---- printing ---------------------------------------------------------------------------------


class Printer:
    """Deployment events as lines: node-coloured log lines, steps, milestones, problems with hints."""

    def __init__(self, config: Config, quiet: bool = False, lines: bool = False, config_file: str | None = None):
        self.quiet = quiet  # --json: nothing but the final document
        self.config_file = config_file  # --config as given: the commands a hint names carry it
        # the engine's own log runs to hundreds of lines: progress is its milestones, phases and problems,
        # and `sparktui logs` has the log itself
        self.lines = lines
        self.log_said = False
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
            elif not self.log_said:
                self.log_said = True
                console.print(
                    Text(
                        with_config(
                            "the engine's own log is not shown here: `sparktui logs -f` follows it", self.config_file
                        ),
                        style="dim",
                    ),
                    soft_wrap=True,
                )
        elif isinstance(e, LaunchStep):
            style = {"failed": "red", "skipped": "dim", "done": "green", "waiting": "yellow"}.get(e.state, "")
            if e.state != "running":
                console.print(
                    Text.assemble(
                        f"[{e.index + 1}/{e.total}] ",
                        self.node(e.node),
                        f" {e.description}: ",
                        (e.state, style),
                        (f" ({e.detail})" if e.detail and e.state != "done" else "", "dim"),
                    )
                )
        elif isinstance(e, Milestone):
            console.print(Text.assemble("  ✓ ", self.node(e.node), " ", (milestone_words(e.kind, e.data), "bold")))
        elif isinstance(e, Problem):
            print_problem(e, self.config_file)
        elif isinstance(e, ProblemCleared):
            console.print(
                Text(f"  (withdrawn: {problem_words(e.problem.kind)} on {e.problem.node}: {e.reason})", style="dim")
            )
        elif isinstance(e, DeploymentChanged) and e.state not in (State.FAILED, State.HUNG):  # the outcome says those
            console.print(
                Text.assemble(
                    ("deployment ", "bold"),
                    e.id,
                    " ",
                    (e.state, _state_style(e.state)),
                    f" — {e.detail}" if e.detail else "",
                )
            )


def _state_style(state: str) -> str:
    return {State.READY: "bold green", State.FAILED: "bold red", State.HUNG: "bold red", State.STOPPED: "dim"}.get(
        state, "bold"
    )


def print_problem(p: Problem, config_file: str | None = None) -> None:
    where = f" on {p.node}" if p.node else ""
    mark, style = ("! ", "bold yellow") if p.provisional else ("✗ ", "bold red")  # a warning may yet pass
    console.print(Text.assemble((mark, style), (problem_words(p.kind), style), where, ": ", p.message))
    if p.hint:
        # the terminal wraps it: a command in the hint stays one line to copy
        console.print(Text.assemble(("  hint: ", "yellow"), with_config(p.hint, config_file)), soft_wrap=True)


def with_config(text: str, config_file: str | None) -> str:
    """A hint's `sparktui ...` commands with the --config this command was given, so they run as printed."""
    if not config_file:
        return text
    return text.replace("`sparktui ", f"`sparktui --config {shlex.quote(config_file)} ")


def result_doc(d: Deployer, printer: Printer, extra: dict | None = None) -> dict:
    cur = d.current
    return {
        "deployment": d.name,
        "engine": cur.engine if cur.known else None,
        "mode": cur.mode if cur.known else None,
        "plan_id": cur.plan_id if cur.known else None,
        "state": cur.state,
        "detail": cur.detail,
        "endpoint": cur.endpoint if cur.state == State.READY else None,
        "check": asdict(d.check) if d.check else None,
        "problems": [p.to_json() for p in d.problems],
        "milestones": [m.to_json() for m in d.milestones],
        "steps": printer.steps,
        "warnings": list(d.warnings),
        "memory": {n: memory_json(e.sample, e.level, e.detail) for n, e in d.memory.items()},
        **(extra or {}),
    }


def outcome_fields(d: Deployer, remove: str) -> dict:
    """error / reason / fix of a launch that failed or hung: the first problem in the engine's own words, its
    hint, and how to remove what the launch left (its containers stay for their logs)."""
    cur = d.current
    if cur.state not in (State.FAILED, State.HUNG) or not d.problems:
        return {}
    p = d.problems[0]
    fix = p.hint + (f"; its containers stay for their logs: {remove} removes them" if remove else "")
    return {"error": cur.detail, "reason": p.message, "fix": fix}


def print_outcome(d: Deployer, args: argparse.Namespace | None = None) -> None:
    cur = d.current
    if cur.state == State.READY and d.check:
        c = d.check
        rate = f", {c.tokens_per_s:.1f} tok/s" if c.tokens_per_s else ""
        console.print(Text.assemble(("ready: ", "bold green"), c.endpoint, f"  (model {c.model})"))
        console.print(f"  chat completion: {c.latency_s:.2f} s, {c.completion_tokens} tokens{rate}", markup=False)
        console.print(f"  endpoint (stays up after this command exits): {c.endpoint}", markup=False)
        console.print(f"  SSH forward from this machine, only while this command runs: {c.local}", markup=False)
    elif cur.state == State.STOPPED:
        console.print(Text.assemble(("stopped: ", "bold yellow"), cur.detail))
    elif cur.state in (State.FAILED, State.HUNG):
        console.print(Text.assemble((f"{cur.state}: ", "bold red"), cur.detail))
        eng = find_engine(cur.engine)
        if cur.state == State.HUNG and eng is not None and eng.hang_pivot:
            to, why = eng.hang_pivot
            dep = (
                f" --deployment {shlex.quote(d.name)}"
                if args is not None and d.name != safe_name(get_config(args).cluster)
                else ""
            )
            cmd = _again(args, "pivot", "--to", to) if args is not None else f"sparktui pivot --to {to}"
            # a wrapped command would not run
            console.print(f"  next: {cmd}{dep}   ({why})", markup=False, soft_wrap=True)
    for w in d.warnings:
        console.print(Text.assemble(("warning: ", "yellow"), w))


# ---- shared flow ------------------------------------------------------------------------------


def _operations(cluster: Cluster, config: Config, bus: EventBus, args: argparse.Namespace) -> Operations:
    timeout = getattr(args, "timeout", None)
    if timeout is not None and not timeout > 0:
        raise CliExit(2, f"--timeout must be positive (got {timeout:g})")
    return Operations(cluster, config, bus, ready_timeout=timeout or READY_TIMEOUT_S)


async def _lock(ops: Operations, op: Op, deployment: str | None, args: argparse.Namespace) -> None:
    """Take the deployment's lock before looking at it: the loser of two at once is refused, naming the
    holder; --break-lock shows the holder and breaks its lock once confirmed."""
    try:
        await ops.lock(op, deployment)
    except LockHeld as e:
        if not getattr(args, "break_lock", False):
            raise CliExit(1, str(e), reason=str(e), fix="wait, or pass --break-lock if that process is gone") from None
        err_console.print(f"{e.where} is held: {e.holder.words()}", markup=False, soft_wrap=True)
        if not confirm(f"break the lock of that {e.holder.op}?", args.yes):
            raise CliExit(1, "nothing changed: the lock stays with its holder") from None
        await ops.lock(op, deployment, breaking=e.holder)
    for note in ops.lock_notes:
        err_console.print(f"note: {note}", markup=False)


def _ask(preview: Preview, yes: bool) -> None:
    """Say what stops and starts where (the core's one formatting); exit 1 unless confirmed."""
    if preview.notes:  # said even with --yes: what a pivot dropped must never pass silently
        err_console.print("\n".join(f"note: {n}" for n in preview.notes), markup=False)
    if not yes:
        err_console.print(preview.text(notes=False), markup=False)
    if not confirm("go ahead?", yes):
        raise not_confirmed()


def _refuse(p: Prepared, args: argparse.Namespace, what: str = "cannot launch") -> int:
    """The prepared operation's checks failed: print them (or the JSON document) and exit 1."""
    if args.json:
        print_json({"deployment": p.deployment, "state": "not started", **p.checks()})
        return 1
    raise CliExit(1, f"{what}:\n" + "\n".join(f"  {e}" for e in p.errors))


async def _finish(d: Deployer, printer: Printer, args: argparse.Namespace, extra: dict | None = None) -> int:
    """After a launch: wait when asked, print the outcome, exit 0 (ready or launched) or 1 (a problem)."""
    if args.wait and d.current.state != State.FAILED:
        # until settled (readiness has its own deadline; stopped: a `sparktui stop` from elsewhere ended it)
        await d.wait(d.ready_timeout + 60)
    left: list[tuple[str, str, str]] = []
    if d.current.state in (State.FAILED, State.HUNG):  # a failed launch does not remove its containers: say which run
        with contextlib.suppress(Exception):
            left = await d.leftovers()
    if args.json:
        dep = "" if d.name == safe_name(get_config(args).cluster) else f" --deployment {shlex.quote(d.name)}"
        print_json(
            result_doc(
                d,
                printer,
                {
                    **(extra or {}),
                    **outcome_fields(d, f"`{_again(args, 'stop')}{dep}`" if left else ""),
                    "left_on_nodes": [{"node": n, "container": c, "state": s} for n, c, s in left],
                },
            )
        )
    else:
        if not args.wait and d.current.state not in (State.FAILED, State.HUNG):
            console.print(f"launched {d.name}; `sparktui logs -f` follows it, `sparktui status` shows it", markup=False)
        print_outcome(d, args)
        if left:
            dep = "" if d.name == safe_name(get_config(args).cluster) else f" --deployment {shlex.quote(d.name)}"
            lines = ["its containers are still on the nodes (a failed launch leaves them, with their logs):"]
            lines += [f"  {n}: {c} ({s})" for n, c, s in left]
            lines += [f"  read them: {_again(args, 'logs')}{dep}   remove them: {_again(args, 'stop')}{dep}"]
            console.print("\n".join(lines), markup=False, soft_wrap=True)
    state = d.current.state
    return (
        0 if state not in (State.FAILED, State.HUNG, State.STOPPED) and (state == State.READY or not args.wait) else 1
    )


async def _preflight(ops: Operations, p: Prepared, args) -> dict | None:
    """Run the rendezvous check of the prepared plan; exit 1 on failure unless --force."""
    if getattr(args, "no_preflight", False) or not p.needs_preflight:
        return None
    plan = p.plan
    assert plan is not None
    if not args.json:
        err_console.print(f"preflight: checking the rendezvous at {plan.head_ip} on {plan.subnet}...", markup=False)
        ops.bus.subscribe(preflight_progress)
    try:
        verdict = await ops.preflight(p, PREFLIGHT_TIMEOUT)
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
    if getattr(args, "force", False):
        if not args.json:
            console.print(summary + "\n(--force: launching anyway)", markup=False)
        return doc
    if args.json:
        print_json({"deployment": plan.deployment, "state": "not started", "preflight": doc})
        raise CliExit(1)
    raise CliExit(1, summary + "\n(fix it, or pass --force to launch anyway)")


async def _stale(ops: Operations, p: Prepared, args: argparse.Namespace) -> dict | None:
    """The preflight named stale containers (stopped ones with sparktui's labels): remove them once
    confirmed (--yes); without a terminal and without --yes nothing is removed. The launch goes on either way."""
    stale = p.verdict.stale if p.verdict is not None else {}
    if not stale:
        return None
    listed = "; ".join(f"{n}: {', '.join(names)}" for n, names in stale.items())
    doc: dict = {
        "found": [{"node": n, "container": c} for n, names in stale.items() for c in names],
        "removed": [],
        "errors": [],
    }
    if not confirm(f"remove the stale container(s) earlier launches left ({listed})?", args.yes):
        doc["kept"] = True
        if not args.json:
            said = (
                "stale containers not removed: pass --yes to remove them"
                if not sys.stdin.isatty()
                else "stale containers kept"
            )
            err_console.print(f"{said} (the launch goes on)", markup=False)
        return doc
    for r in await ops.remove_stale(stale):
        doc["removed"] += [{"node": r["node"], "container": c} for c in r["removed"]]
        if r["error"]:
            doc["errors"].append({"node": r["node"], "error": r["error"]})
        if not args.json:
            what = ", ".join(r["removed"]) or "nothing"
            err_console.print(f"{r['node']}: removed {what}" + (f" ({r['error']})" if r["error"] else ""), markup=False)
    doc["kept"] = False
    return doc


def _dry_run(p: Prepared, args: argparse.Namespace) -> int:
    """What a launch would do, as the TUI's form would prepare it: plan, checks, stops and starts."""
    if args.json:
        print_json({**p.to_json(), "plan": p.plan.to_json() if p.plan else None})
    else:
        console.print(p.preview.text(), markup=False)
        for w in p.warnings:
            console.print(Text.assemble(("warning: ", "yellow"), w))
        for e in p.errors:
            console.print(Text.assemble(("error: ", "red"), e))
        console.print("dry run: nothing started" + ("" if p.ok else "; a launch would be refused"), markup=False)
    return 0 if p.ok else 1


def _warn(p: Prepared, args: argparse.Namespace) -> None:
    if not args.json:
        for w in p.warnings:
            console.print(Text.assemble(("warning: ", "yellow"), w))


def _again(args: argparse.Namespace, *words: str) -> str:
    cfg = f" --config {shlex.quote(args.config)}" if getattr(args, "config", None) else ""
    return "sparktui " + " ".join(words) + cfg


class _Term:
    """SIGTERM (`kill`, a service manager) ends the watching the way Ctrl-C does, so it is said too:
    without a handler Python dies at once and prints nothing."""

    def __init__(self, sigs: tuple[signal.Signals, ...] = (signal.SIGTERM,)):
        self.fired, self.sigs = False, sigs
        self.loop: asyncio.AbstractEventLoop | None = None
        try:
            loop, task = asyncio.get_running_loop(), asyncio.current_task()
        except RuntimeError:
            return  # no loop (a test calling the context directly): nothing to hook
        if task is None:
            return
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            for sig in sigs:
                loop.add_signal_handler(sig, self._fire, task)
            self.loop = loop

    def _fire(self, task: asyncio.Task) -> None:
        self.fired = True
        task.cancel()

    def remove(self) -> None:
        if self.loop is not None:
            for sig in self.sigs:
                with contextlib.suppress(Exception):
                    self.loop.remove_signal_handler(sig)


@contextlib.contextmanager
def interrupted(args: argparse.Namespace, p: Prepared):
    """Ctrl-C or SIGTERM here leaves the containers running on the nodes: say which, and how to watch
    or stop them."""
    term = _Term()
    try:
        yield
    except (KeyboardInterrupt, asyncio.CancelledError):
        dep = (
            "" if p.deployment == safe_name(get_config(args).cluster) else f" --deployment {shlex.quote(p.deployment)}"
        )
        how = "terminated (SIGTERM)" if term.fired else "interrupted"
        lines = [f"{how}: sparktui stopped watching; what started keeps running on the nodes:"]
        lines += [f"  {n}: {w}" for n, w in p.preview.starts] or ["  (nothing had started yet)"]
        lines += [
            f"  watch it: {_again(args, 'logs', '-f')}{dep}   or   {_again(args, 'status')}",
            f"  stop it:  {_again(args, 'stop')}{dep}",
        ]
        err_console.print("\n".join(lines), markup=False, soft_wrap=True)  # commands stay copyable
        if term.fired:  # a cancelled task would end in a traceback; 143 is the shell's code for SIGTERM
            raise CliExit(143) from None
        raise
    finally:
        term.remove()


# ---- commands ---------------------------------------------------------------------------------


async def cmd_launch(args: argparse.Namespace) -> int:
    config = get_config(args)
    opts, notes = options_from_args(args, config)
    bus = EventBus()
    printer = Printer(config, quiet=args.json, config_file=getattr(args, "config", None))
    bus.subscribe(printer)
    async with Cluster(config, journal=journal()) as cluster:
        ops = _operations(cluster, config, bus, args)
        try:
            if not args.dry_run:  # a dry run changes nothing: it needs no lock
                await _lock(ops, Op.LAUNCH, opts.deployment, args)
            p = await ops.prepare(Op.LAUNCH, Choices(options=opts, notes=notes))
            if args.dry_run:
                return _dry_run(p, args)
            if not p.ok:
                return _refuse(p, args)
            _warn(p, args)
            extra: dict = {"plan_id": p.plan.plan_id if p.plan else None}
            if p.resuming and not args.json:
                console.print("\n".join(p.preview.notes), markup=False)
            extra["preflight"] = await _preflight(ops, p, args)
            extra["stale_containers"] = await _stale(ops, p, args)
            if p.replaces:
                _ask(p.preview, args.yes)
            with interrupted(args, p):
                await ops.run(p, force=True)  # the preflight's verdict was judged above (--force)
                await ops.unlock(p.deployment)  # every step ran: watching it needs no lock
                return await _finish(ops.deployer(), printer, args, extra)
        except DeploymentExists as e:  # something appeared between the look and the launch
            raise CliExit(1, f"{e}:\n" + "\n".join(f"  {x}" for x in e.lines())) from None
        except DeployError as e:
            raise CliExit(1, str(e)) from None
        finally:
            await ops.close()


async def cmd_stop(args: argparse.Namespace) -> int:
    config = get_config(args)
    bus = EventBus()
    printer = Printer(config, quiet=args.json, config_file=getattr(args, "config", None))
    bus.subscribe(printer)
    async with Cluster(config, journal=journal()) as cluster:
        ops = _operations(cluster, config, bus, args)
        try:
            await _lock(ops, Op.STOP, args.deployment, args)
            p = await ops.prepare(Op.STOP, Choices(deployment=args.deployment))
            down = [f"{f.node}: {f.error}" for f in p.found.values() if f.error]
            runs = [f"{n}: {c}" for n, c in p.preview.stops if not c.startswith("?")]
            if not runs:
                if args.json:
                    print_json({"deployment": p.deployment, "removed": 0, "unreachable": down})
                else:
                    console.print(
                        f"nothing to stop: no container of {p.deployment}"
                        + (f" (could not ask {'; '.join(down)})" if down else ""),
                        markup=False,
                    )
                return 1 if down else 0
            _ask(p.preview, args.yes)
            result = await ops.run(p)
        except DeployError as e:
            raise CliExit(1, str(e)) from None
        finally:
            await ops.close()
    removed = int(result.split()[1]) if result.startswith("removed ") else 0
    if args.json:
        print_json({"deployment": p.deployment, "removed": removed, "containers": runs, "unreachable": down})
    elif down:
        err_console.print("not asked (unreachable): " + "; ".join(down), markup=False)
    return 1 if down else 0


async def _switch(args: argparse.Namespace, op: Op) -> int:
    config = get_config(args)
    bus = EventBus()
    printer = Printer(config, quiet=args.json, config_file=getattr(args, "config", None))
    bus.subscribe(printer)
    async with Cluster(config, journal=journal()) as cluster:
        ops = _operations(cluster, config, bus, args)
        try:
            await _lock(ops, op, args.deployment, args)
            p = await ops.prepare(op, Choices(deployment=args.deployment, to=getattr(args, "to", None)))
            if not p.ok:
                return _refuse(p, args, f"cannot {op.value}")
            _warn(p, args)
            extra: dict = {"plan_id": p.plan.plan_id if p.plan else None}
            extra["preflight"] = await _preflight(ops, p, args)
            extra["stale_containers"] = await _stale(ops, p, args)
            _ask(p.preview, args.yes)
            with interrupted(args, p):
                await ops.run(p, force=True)
                await ops.unlock(p.deployment)
                return await _finish(ops.deployer(), printer, args, extra)
        except DeployError as e:
            raise CliExit(1, str(e)) from None
        finally:
            await ops.close()


async def cmd_pivot(args: argparse.Namespace) -> int:
    return await _switch(args, Op.PIVOT)


async def cmd_redeploy(args: argparse.Namespace) -> int:
    return await _switch(args, Op.REDEPLOY)


async def cmd_logs(args: argparse.Namespace) -> int:
    config = get_config(args)
    name = safe_name(args.deployment or config.cluster)
    if args.node is not None and args.node not in [n.name for n in config.nodes]:
        from ..core.config.yamlpos import unknown_names

        raise CliExit(2, unknown_names("node", [args.node], [n.name for n in config.nodes]))
    printer = Printer(config, config_file=getattr(args, "config", None))
    async with Cluster(config, journal=journal()) as cluster:
        try:
            await load_record(cluster[config.head.name], name)  # learns the launch's secrets, to mask their echoes
        except StateFileError as e:
            err_console.print(f"{e.line()} (its secrets cannot be masked in these logs)", markup=False, soft_wrap=True)
        found = await find_all(cluster, name, [args.node] if args.node else None)
        down = [f"{f.node}: {f.error}" for f in found.values() if f.error]
        targets = [(f.node, c.name) for f in found.values() for c in f.containers]
        if not targets:
            raise CliExit(1, f"no container of {name}" + (f" ({'; '.join(down)})" if down else ""))

        def show(node: str, container: str, lines: LogBatch) -> None:
            for ln in lines:
                if args.json:
                    print_json_line({"node": node, "container": container, "ts": ln.ts, "line": ln.text})
                else:
                    stamp = f"{ln.ts} " if args.timestamps and ln.ts else ""
                    console.print(Text.assemble(printer.node(node), " │ ", stamp, ln.text), soft_wrap=True)

        followers = [
            LogFollower(cluster[n], c, lambda lines, n=n, c=c: show(n, c, lines), since=args.since, follow=args.follow)
            for n, c in targets
        ]
        await asyncio.gather(*(f.run() for f in followers))
    if down:
        err_console.print("not read (unreachable): " + "; ".join(down), markup=False)
    return 1 if down else 0


def print_json_line(doc: dict) -> None:
    from . import common

    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    common.json_written = True  # JSON lines begun: an error after them goes to stderr alone
