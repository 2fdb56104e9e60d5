"""`sparktui check` and `sparktui status`: connect to every node at once, probe, show the facts."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ..core.config.config import Config
from ..core.nodes.inventory import Inventory, take_inventory
from ..core.nodes.requirements import Need, node_needs, unmet
from ..core.network.ring import describe_layout
from ..core.remote.ssh import Cluster
from ..core.plan.support import line_of as support_line
from . import common
from .common import add_config_arg, add_json_arg, get_config, journal, print_json

if TYPE_CHECKING:  # rich and humanize load only for the tables: `check --json` prints without them
    from rich.console import Console
    from rich.table import Table


def __getattr__(name: str):
    if name == "console":
        return common.console
    raise AttributeError(name)


# Piped, rich would lay the tables out for 80 columns and cut addresses and model names: a pipe has
# no width, so the tables take their natural one (COLUMNS, when set, still wins).
PIPE_WIDTH = 400


def _console() -> Console:
    """Where the tables go: one a caller set here, or the CLI's console; piped (no terminal, no
    COLUMNS), a console of its own as wide as the tables need."""
    set_here = globals().get("console")
    if set_here is not None:
        return set_here
    made = common.console
    if made.is_terminal or os.environ.get("COLUMNS"):
        return made
    wide = globals().get("_wide")
    if wide is None:
        from rich.console import Console

        wide = globals()["_wide"] = Console(width=PIPE_WIDTH, highlight=False)
    return wide


# Extra sections of `status` (transfers, deployments): name -> async fn(cluster, config) -> list[dict].
STATUS_SECTIONS: dict[str, object] = {}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="validate the config, connect to every node, probe and show the facts and what each node still needs",
    )
    add_config_arg(p)
    add_json_arg(p)
    p.add_argument("--strict", action="store_true", help="exit 1 also when a node lacks something it needs")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("status", help="node facts, transfers and deployments")
    add_config_arg(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_status)


def _size(n: int | None) -> str:
    import humanize

    return humanize.naturalsize(n, binary=True) if n is not None else "?"


def node_table(inv: Inventory) -> Table:
    from rich.table import Table

    t = Table(title="nodes", title_justify="left")
    for col in ("node", "host", "state", "GPU", "memory (avail/total)", "disk free", "docker", "model"):
        t.add_column(col, min_width=10 if col == "model" else None)  # "incomplete" whole, even at 80 columns
    for f in inv.facts.values():
        if not f.reachable:
            t.add_row(f.name, f.host, f"[red]unreachable[/] {f.error or ''}", "", "", "", "", "")
            continue
        gpu = f"{f.gpu.count}× {f.gpu.name}" if f.gpu.count else "none"
        mem = f"{_size(f.memory.available_bytes)} / {_size(f.memory.total_bytes)}"
        model = (
            "absent"
            if not f.model
            else _size(f.model.bytes)
            if f.model.present
            else "[red]incomplete[/]"
            if f.model.incomplete
            else "absent"
        )
        t.add_row(f.name, f.host, "[green]ok[/]", gpu, mem, _size(f.disk_free_bytes), f.docker.version or "-", model)
    return t


def fabric_table(inv: Inventory, names: list[str]) -> Table:
    from rich.table import Table

    t = Table(title="subnets joining every node (best first)", title_justify="left")
    t.add_column("subnet")
    t.add_column("kind")
    for n in names:
        t.add_column(n)
    for i, s in enumerate(inv.subnets):
        kind = ("RoCE" if s.rdma else "TCP") + (" management" if s.management else "") + (" ← fabric" if i == 0 else "")
        cells = []
        for n in names:
            a = s.nodes.get(n)
            cells.append(f"{a.iface} {a.ip}" + (f" ({a.rdma})" if a and a.rdma else "") if a else "-")
        t.add_row(s.subnet, kind, *cells)
    return t


def print_inventory(config: Config, inv: Inventory) -> None:
    from rich.text import Text

    console = _console()
    console.print(node_table(inv))
    if inv.subnets:
        console.print(fabric_table(inv, [n.name for n in config.nodes]))
    if inv.layout:
        console.print(f"fabric layout: {describe_layout(inv.layout)}", markup=False, highlight=False)
    for f in inv.facts.values():
        if f.model is not None and f.model.incomplete:
            console.print(
                Text.assemble(
                    (f"{f.name}: ", "red"),
                    f"model incomplete at {f.model.path} "
                    f"({_size(f.model.bytes)} there): {f.model.incomplete}; "
                    "`sparktui sync model` completes and verifies it",
                )
            )
        for note in getattr(f, "notes", []):
            console.print(f"[yellow]{f.name}:[/] {note}", markup=True)
    for w in inv.warnings:
        console.print(f"[yellow]warning:[/] {w}")


def _row_text(r: dict) -> str:
    """One line per status row: its own summary, or a transfer's route, state and outcome."""
    if "summary" in r:
        return str(r["summary"])
    if "kind" in r and "dest" in r:
        pct = f" {r['percent']:.0f}%" if r.get("percent") is not None else ""
        msg = f" — {r['message']}" if r.get("message") else ""
        return f"{r['id']}: {r['kind']} {r.get('source')} → {r['dest']} {r.get('state')}{pct}{msg}"
    return ", ".join(f"{k}={v}" for k, v in r.items())


_MARK = {"ok": "[green]✓[/]", "todo": "[cyan]→[/]", "fail": "[red]✗[/]", "unknown": "[yellow]?[/]"}


def _print_marks(node: str, marks: list[str]) -> None:
    """`node  ✓ gpu  ✗ docker ...`, wrapped between marks only (a mark never parts from its need)."""
    from rich.markup import escape
    from rich.text import Text

    console = _console()
    indent = " " * (len(node) + 2)
    line, width = f"[bold]{escape(node)}[/]  ", len(node) + 2
    for i, m in enumerate(marks):
        w = Text.from_markup(m).cell_len
        if i and width + 2 + w > console.width:
            console.print(line, highlight=False)
            line, width = indent, len(indent)
        elif i:
            line, width = line + "  ", width + 2
        line, width = line + m, width + w
    console.print(line, highlight=False)


def print_needs(needs: list[Need]) -> None:
    """Per node: one line of marks, then each need that is not met with what was found and the fix
    (whole lines, never cut: the fix is a command to copy)."""
    from rich.markup import escape

    console = _console()
    console.print("[bold]what the nodes need[/] (✓ ok, → sparktui copies it, ✗ to fix, ? unknown)")
    nodes: dict[str, list[Need]] = {}
    for n in needs:
        nodes.setdefault(n.node, []).append(n)
    for node, rows in nodes.items():
        _print_marks(node, [f"{_MARK[n.status]} {n.id}" for n in rows])
        for n in rows:
            if n.status != "ok":
                console.print(f"  {_MARK[n.status]} {escape(n.what)}: {escape(n.detail)}", highlight=False)
                if n.fix:
                    console.print(f"      fix: {escape(n.fix)}", highlight=False)
    bad = unmet(needs)
    if bad:
        where = ", ".join(escape(n) for n in dict.fromkeys(n.node for n in bad))
        console.print(f"[red]{len(bad)} need{'s' if len(bad) > 1 else ''} to fix[/] on {where}: each fix is above")
    else:
        console.print(
            "[green]every node has what it needs[/]"
            + (" (→: sparktui copies the rest)" if any(n.status == "todo" for n in needs) else "")
        )


async def gather(config: Config) -> tuple[Inventory, dict[str, list[dict]]]:
    async with Cluster(config, journal=journal()) as cluster:
        inv = await take_inventory(cluster, config)
        extra = {}
        for name, fn in STATUS_SECTIONS.items():
            extra[name] = await fn(cluster, config)  # type: ignore[operator]
    return inv, extra


async def _images(cluster: Cluster, config: Config) -> dict[str, dict]:
    """What each configured image holds, from the inspection a plan made on the head (cached there by image
    ID); check runs no image, and asks while the probe runs so it costs no extra time."""
    import asyncio

    from ..core.plan.image import holds, inspect_image

    node = cluster.nodes.get(config.head.name)
    if node is None:
        return {}
    refs = config.used_images()
    infos = await asyncio.gather(*(inspect_image(node, r, run_image=False) for r in dict.fromkeys(refs.values())))
    by_ref = {i.ref: i for i in infos}
    return {
        e: {
            "image": r,
            "node": node.name,
            "holds": holds(by_ref[r]),
            "versions": by_ref[r].versions,
            "problem": by_ref[r].problem,
            "unread": by_ref[r].unread,
        }
        for e, r in refs.items()
    }


def _read_by_the_model_check(entry: dict, s: dict) -> None:
    """An image whose versions are not cached, where the model check ran it and read the engine's release:
    say what was read and what was not, never 'not read' beside the release it then shows."""
    if not entry.pop("unread", False) or not s.get("engine_version"):
        return
    from ..core.engines import ENGINES, label

    engine = s.get("engine")
    read = {
        ENGINES[engine].package if engine in ENGINES else engine: s["engine_version"],
        "transformers": s.get("transformers"),
    }
    entry["versions"] = {**entry["versions"], **read}
    entry["holds"] = (
        f"{label(engine)} {s['engine_version']}, transformers {s.get('transformers') or 'absent'}; "
        f"Ray, torch and NCCL not read yet (`sparktui plan` reads them once per image)"
    )
    entry["problem"] = (
        f"Ray, torch and NCCL in {entry['image']} are not read yet on {entry['node']} "
        f"(`sparktui plan` reads them once per image)"
    )


async def cmd_check(args: argparse.Namespace) -> int:
    config = get_config(args)
    async with Cluster(config, journal=journal()) as cluster:
        import asyncio

        from ..core.plan.support import support_of_config

        inv, images, support = await asyncio.gather(
            take_inventory(cluster, config), _images(cluster, config), support_of_config(cluster, config)
        )
        if not inv.facts.get(config.head.name) or not inv.facts[config.head.name].reachable:
            images = {}  # the head did not answer: nothing to say about its images
        for engine, s in support.items():  # whether each image loads the model, as the image answered
            if engine in images:
                images[engine]["support"] = s.to_json()
                _read_by_the_model_check(images[engine], images[engine]["support"])
        for entry in images.values():
            entry.pop("unread", None)
    needs = node_needs(config, inv)
    if args.json:
        print_json({**inv.to_json(), "images": images, "requirements": [n.to_json() for n in needs]})
    else:
        print_inventory(config, inv)
        for engine, i in images.items():
            _console().print(f"[bold]{engine}[/] {i['image']} on {i['node']}: {i['holds']}", highlight=False)
            s = i.get("support")
            if s:
                style = {"supported": "green", "unsupported": "red"}.get(s["status"], "yellow")
                _console().print("  " + support_line(s), style=style, highlight=False, markup=False)
        print_needs(needs)
    if not inv.all_reachable:
        return 1
    return 1 if args.strict and unmet(needs) else 0


async def cmd_status(args: argparse.Namespace) -> int:
    config = get_config(args)
    inv, extra = await gather(config)
    if args.json:
        print_json({**inv.to_json(), **extra})
    else:
        print_inventory(config, inv)
        console = _console()
        for name, rows in extra.items():
            console.print(f"[bold]{name}[/]: " + ("" if rows else "none"))
            for r in rows:
                console.print("  " + _row_text(r), markup=False)
    return 0 if inv.all_reachable else 1
