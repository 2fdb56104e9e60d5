"""`sparktui sync model|image|status|cancel` and `sparktui setup trust`."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import time

import humanize
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from ..core.config import argcheck
from ..core.config.config import Config
from ..core.engines import ENGINES
from ..core.state.events import TransferProgress
from ..core.remote.ssh import Cluster
from ..core.config.yamlpos import unknown_names
from ..core.transfers import (
    Outcome,
    TransferError,
    TransferOptions,
    cancel_transfer,
    setup_trust,
    sync_image,
    sync_model,
    transfer_status,
    trust_plan,
)
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


def _size(n: float | None) -> str:
    return humanize.naturalsize(n or 0, binary=True)


def _rate(r: float | None) -> str:
    return f"{humanize.naturalsize(r, binary=True)}/s" if r else "-"


def _eta(s: float | None) -> str:
    return humanize.naturaldelta(s) if s is not None else "-"


def _add_transfer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--to", action="append", metavar="NODE", help="destination node (repeat; default: all others)")
    p.add_argument(
        "--wait", action="store_true", help="follow to the end with a progress bar; exit 0 only once verified"
    )
    p.add_argument(
        "--subnet", metavar="CIDR|IP|IFACE", help="copy over this subnet (default: the fastest that joins the nodes)"
    )
    p.add_argument(
        "--streams",
        type=checked(argcheck.count, "--streams", 1, 64),
        default=1,
        metavar="N",
        help="transfers each sending node runs at once (default 1: a node's streams share its one "
        "link, so each fresh copy starts sending instead)",
    )
    add_json_arg(p)


def _add_trust_parser(subparsers) -> None:
    """`setup trust`, under a `setup` group another module may already have added."""
    setup = subparsers.choices.get("setup") if hasattr(subparsers, "choices") else None
    if setup is None:
        setup = subparsers.add_parser("setup", help="one-time preparation of the nodes")
    groups = [a for a in setup._actions if isinstance(a, argparse._SubParsersAction)]
    inner = groups[0] if groups else setup.add_subparsers(dest="setup_command", metavar="WHAT", required=True)
    t = inner.add_parser("trust", help="let the nodes log in to each other over the fabric (for transfers)")
    t.add_argument("--yes", "-y", action="store_true", help="do it without asking")
    t.add_argument(
        "--from",
        dest="senders",
        action="append",
        metavar="NODE",
        help="only this sending node (repeat; default: every node, as any may pass a copy on)",
    )
    t.add_argument("--subnet", metavar="CIDR|IP|IFACE", help="the subnet transfers use (default: the fastest)")
    add_json_arg(t)
    add_config_arg(t)
    t.set_defaults(func=cmd_trust)


def register(subparsers) -> None:
    from . import check

    check.STATUS_SECTIONS["transfers"] = transfer_status  # `sparktui status` lists them too
    sync = subparsers.add_parser("sync", help="copy the model or a container image to the nodes")
    sub = sync.add_subparsers(dest="sync_command", metavar="WHAT", required=True)

    m = sub.add_parser("model", help="rsync the model directory from its source node to the others")
    _add_transfer_args(m)
    m.add_argument("--checksum", action="store_true", help="after copying, also compare contents by checksum")
    m.add_argument("--bwlimit", metavar="RATE", type=checked(argcheck.rsync_rate), help="rsync --bwlimit, e.g. 200m")
    m.add_argument(
        "--copy-streams",
        type=checked(argcheck.count, "--copy-streams", 1, 64),
        metavar="K",
        help="most parallel rsync streams within each copy (default: model.copy_streams, 8; fewer "
        "on a sender with fewer cores or fewer large files)",
    )
    m.set_defaults(func=cmd_model)
    add_config_arg(m)

    i = sub.add_parser("image", help="docker save | docker load an image onto the nodes that lack it")
    i.add_argument(
        "image", metavar="ENGINE_OR_IMAGE", help=f"{', '.join(ENGINES)} (the configured image) or an image reference"
    )
    _add_transfer_args(i)
    i.set_defaults(func=cmd_image)
    add_config_arg(i)

    s = sub.add_parser("status", help="transfers running or finished on the nodes")
    add_json_arg(s)
    add_config_arg(s)
    s.set_defaults(func=cmd_status)

    c = sub.add_parser("cancel", help="stop a transfer (partial files stay; the next sync resumes)")
    c.add_argument("id", help="transfer id (see sync status)")
    add_json_arg(c)
    add_config_arg(c)
    c.set_defaults(func=cmd_cancel)

    _add_trust_parser(subparsers)


def _check_nodes(config: Config, names: list[str] | None) -> None:
    known = [n.name for n in config.nodes]
    bad = [n for n in names or [] if n not in known]
    if bad:
        raise CliExit(2, unknown_names("node", bad, known))


class Bars:
    """One rich progress bar per destination, fed by TransferProgress events."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%"),
            TextColumn("{task.fields[info]}"),
            console=err_console,
            transient=False,
        )
        self.tasks: dict[tuple[str, str], TaskID] = {}

    def __call__(self, e: object) -> None:
        if not isinstance(e, TransferProgress):
            return
        if e.dest == "-":  # a note about the whole sync
            if e.message:
                self.progress.console.print(f"note: {e.message}", markup=False)
            return
        key = (e.kind, e.dest)
        if key not in self.tasks:
            self.tasks[key] = self.progress.add_task(f"{e.kind} {e.source} → {e.dest}", total=100, info="")
        tid = self.tasks[key]
        if e.state == "running":
            done = f"{_size(e.bytes)}" + (f" / {_size(e.total_bytes)}" if e.total_bytes else "")
            files = f"  files {e.files_done}/{e.files_total}" if e.files_done is not None and e.files_total else ""
            info = f"{done}  {_rate(e.rate)}  eta {_eta(e.eta)}{files}"
            if e.streams and len(e.streams) > 1:  # the bar is their sum; say how many add up to it
                info += f"  {sum(1 for r in e.streams if not r.get('done'))}/{len(e.streams)} streams"
            if e.cipher:
                info += f"  ssh {e.cipher.split('@')[0]}"
            if e.message:
                info += f"  ({e.message})"
        else:
            info = f"{e.state}" + (f": {e.message}" if e.message else "")
        self.progress.update(
            tid,
            description=f"{e.kind} {e.source} → {e.dest}",
            completed=e.percent if e.percent is not None else self.progress.tasks[tid].completed,
            info=info,
        )

    def __enter__(self) -> "Bars":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()


def _report(outcomes: list[Outcome], as_json: bool, waited: bool) -> int:
    if as_json:
        print_json([o.to_dict() for o in outcomes])
    else:
        for o in outcomes:
            mark = "ok " if o.ok else "FAILED"
            via = f" from {o.source}" if o.source else ""
            tid = f" [{o.id}]" if o.id else ""
            console.print(f"{mark} {o.dest}{via}{tid}: {o.message}", markup=False)
        if not waited and any(o.ok and o.id for o in outcomes):
            console.print(
                "running detached on the nodes; `sparktui sync status` shows them, "
                "`--wait` follows them to verification",
                markup=False,
            )
    return 0 if all(o.ok for o in outcomes) else 1


def _interrupted(args: argparse.Namespace, seen: dict[str, str], states: dict[str, str] | None = None) -> None:
    """Ctrl-C stops only the watching: the copies run detached on the nodes; say which and how to act.
    A copy whose verification was cut off stays marked incomplete until a sync verifies it."""
    cfg = f" --config {shlex.quote(args.config)}" if getattr(args, "config", None) else ""
    states = states or {}
    started = {tid: what for tid, what in seen.items() if tid and tid != "-"}  # "-": a note before any copy
    if not started:
        lines = [
            "interrupted: no copy had started on the nodes yet, so none keeps running "
            f"(`sparktui sync status{cfg}` lists any that did)"
        ]
        err_console.print("\n".join(lines), markup=False, soft_wrap=True)
        return
    copying = {t: w for t, w in started.items() if states.get(t) != "verifying"}
    verifying = {t: w for t, w in started.items() if states.get(t) == "verifying"}
    lines = ["interrupted: sparktui stopped following."]
    if copying:
        lines += ["  these copies keep running on the nodes:"] + [f"    {t}: {w}" for t, w in copying.items()]
    if verifying:
        lines += [
            "  these were being verified, which stopped with sparktui; each destination stays marked "
            "incomplete until `sparktui sync model` runs again (it verifies without copying again):"
        ]
        lines += [f"    {t}: {w}" for t, w in verifying.items()]
    lines += [f"  watch them: sparktui sync status{cfg}"]
    if copying:
        lines += [f"  stop one:   sparktui sync cancel {next(iter(copying))}{cfg}"]
    err_console.print("\n".join(lines), markup=False, soft_wrap=True)  # commands stay copyable


def _options(args: argparse.Namespace) -> TransferOptions:
    if args.streams < 1:
        raise CliExit(2, "--streams must be at least 1")
    return TransferOptions(
        streams_per_source=args.streams,
        checksum=getattr(args, "checksum", False),
        bwlimit=getattr(args, "bwlimit", None),
        **({"max_streams": args.copy_streams} if getattr(args, "copy_streams", None) else {}),
    )


async def _run_sync(args: argparse.Namespace, start) -> int:
    config = get_config(args)
    _check_nodes(config, args.to)
    opts = _options(args)
    as_json = getattr(args, "json", False)
    seen: dict[str, str] = {}  # transfer id -> "source → dest", for what Ctrl-C leaves running
    states: dict[str, str] = {}  # transfer id -> its last state (a verification dies with this process)

    def heard(e: object) -> None:
        if isinstance(e, TransferProgress) and e.dest != "-" and e.id and e.id != "-":
            seen[e.id] = f"{e.kind} {e.source} → {e.dest}"
            states[e.id] = e.state

    async with Cluster(config, journal()) as cluster:
        try:
            if args.wait and not as_json:
                with Bars() as bars:
                    outcomes = await start(cluster, config, opts, lambda e: (heard(e), bars(e)))
            else:
                outcomes = await start(cluster, config, opts, heard)
        except (KeyboardInterrupt, asyncio.CancelledError):
            _interrupted(args, seen, states)
            raise
        except TransferError as e:
            if as_json:
                print_json({"error": str(e)})
                return 1
            raise CliExit(1, str(e)) from None
    if not outcomes and not as_json:
        console.print("nothing to copy: no destination", markup=False)
    return _report(outcomes, as_json, args.wait)


async def _warn_support(cluster, config) -> None:
    """Before the weights move: say which configured image cannot load the model (the image answers, on
    the model's node); a warning on stderr, so `--json` keeps its one document on stdout."""
    from ..core.plan.support import before_copy, support_of_config

    refusals, warnings = before_copy(await support_of_config(cluster, config))
    for words in refusals + warnings:
        err_console.print(f"warning: {words}", markup=False, soft_wrap=True)


async def cmd_model(args: argparse.Namespace) -> int:
    async def start(cluster, config, opts, emit):
        await _warn_support(cluster, config)
        return await sync_model(cluster, config, args.to, emit=emit, opts=opts, subnet=args.subnet, wait=args.wait)

    return await _run_sync(args, start)


async def cmd_image(args: argparse.Namespace) -> int:
    return await _run_sync(
        args,
        lambda cluster, config, opts, emit: sync_image(
            cluster, config, args.image, args.to, emit=emit, opts=opts, subnet=args.subnet, wait=args.wait
        ),
    )


def status_rows(items: list[dict]) -> list[str]:
    """One line per transfer, for `sync status` and `sparktui status`."""
    rows = []
    for t in items:
        if t.get("state") == "unreadable":  # no route or size to show: its line names the file and the way out
            rows.append(f"{t['id']}  on {t['source']}  unreadable\n    {t['message']}")
            continue
        what = t.get("path") or t.get("image") or ""
        moved = _size(t.get("bytes")) + (f"/{_size(t['total_bytes'])}" if t.get("total_bytes") else "")
        pct = f"{t['percent']:.0f}%" if t.get("percent") is not None else "-"
        age = humanize.naturaltime(time.time() - t["started"]) if t.get("started") else ""
        line = f"{t['id']}  {t['kind']} {t['source']} → {t['dest']}  {t['state']}  {pct} {moved}  {what}  {age}"
        if t.get("state") == "running" and t.get("rate"):
            line += f"  {_rate(t['rate'])} eta {_eta(t.get('eta'))}"
        if t.get("message") and t.get("state") != "running":
            line += f"\n    {t['message']}"
        rows.append(line)
    return rows


async def cmd_status(args: argparse.Namespace) -> int:
    config = get_config(args)
    async with Cluster(config, journal()) as cluster:
        errors = {n: node.error for n, node in cluster.nodes.items() if not node.connected}
        items = await transfer_status(cluster, config)
    if getattr(args, "json", False):
        print_json({"transfers": items, "unreachable": errors})
    else:
        for n, e in errors.items():
            err_console.print(f"{n}: unreachable ({e}); its transfers are not listed", markup=False)
        for line in status_rows(items) or ["no transfers"]:
            console.print(line, markup=False)
    return 1 if any(t["state"] in ("failed", "lost", "unreadable") for t in items[-20:]) else 0


async def cmd_cancel(args: argparse.Namespace) -> int:
    config = get_config(args)
    async with Cluster(config, journal()) as cluster:
        try:
            said = await cancel_transfer(cluster, args.id)
        except ValueError as e:
            raise CliExit(2, str(e)) from None
        except TransferError as e:
            if getattr(args, "json", False):
                print_json({"id": args.id, "error": str(e)})
                return 1
            raise CliExit(1, str(e)) from None
    if getattr(args, "json", False):
        print_json({"id": args.id, "result": said})
    else:
        console.print(said, markup=False)
    return 0


async def cmd_trust(args: argparse.Namespace) -> int:
    config = get_config(args)
    _check_nodes(config, args.senders)
    as_json = getattr(args, "json", False)
    async with Cluster(config, journal()) as cluster:
        try:
            plan = await trust_plan(cluster, config, senders=args.senders, subnet=args.subnet)
        except TransferError as e:
            raise CliExit(1, str(e)) from None
        if not as_json or not args.yes:
            out = err_console if as_json else console
            out.print("sparktui will, through its own SSH logins:", markup=False)
            for line in plan.describe():
                out.print(f"  - {line}", markup=False)
        if not confirm("Proceed?", args.yes):
            raise not_confirmed()
        steps = await setup_trust(cluster, plan)
    if as_json:
        print_json([{"node": s.node, "ok": s.ok, "what": s.what} for s in steps])
    else:
        for s in steps:
            console.print(f"{'ok ' if s.ok else 'FAILED'} {s.node}: {s.what}", markup=False)
    return 0 if all(s.ok for s in steps) else 1
