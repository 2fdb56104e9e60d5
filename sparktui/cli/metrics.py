"""`sparktui metrics [--watch] [--json]`: the serving view of a deployment, from the engine's /metrics.

Read on the head node through sparktui's SSH connection; two scrapes --interval apart give the rates
(tokens/s) and the latency quantiles of what was served between them.
"""

from __future__ import annotations

import argparse
import asyncio

from rich.table import Table

from ..core.config import argcheck
from ..core.deploy.metrics_read import MetricsUnavailable, Target, locate, scrape
from ..core.engines.common import safe_name
from ..core.serving.metrics import Serving
from ..core.remote.ssh import Cluster
from .common import CliExit, add_config_arg, add_json_arg, checked, console, err_console, get_config, journal
from .deploy import print_json_line


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="tokens/s, requests, KV-cache use and latency quantiles from the engine")
    p.add_argument("--deployment", help="deployment name (default: the cluster name)")
    p.add_argument("--watch", action="store_true", help="keep printing every --interval seconds (Ctrl-C stops)")
    p.add_argument(
        "--interval",
        type=checked(argcheck.seconds, "--interval"),
        default=2.0,
        metavar="S",
        help="seconds between scrapes (default 2)",
    )
    p.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N reports")
    add_json_arg(p)
    add_config_arg(p)
    p.set_defaults(func=cmd_metrics)


def _fmt(v, unit: str = "", nd: int = 1) -> str:
    return "—" if v is None else f"{v:.{nd}f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def render(j: dict, t: Target) -> Table:
    tab = Table(title=f"{t.deployment} · {j['engine']} on {t.node}:{t.port}", show_header=False, box=None)
    ms = lambda v: None if v is None else v * 1000  # noqa: E731
    rows = [
        ("generation", _fmt(j["generation_tokens_per_s"], " tok/s")),
        ("prompt", _fmt(j["prompt_tokens_per_s"], " tok/s")),
        ("requests", f"{_fmt(j['running'])} running · {_fmt(j['waiting'])} waiting"),
        ("KV cache", _fmt(None if j["kv_cache_usage"] is None else j["kv_cache_usage"] * 100, " %")),
        ("TTFT p50/p90", f"{_fmt(ms(j['ttft_p50_s']), ' ms')} / {_fmt(ms(j['ttft_p90_s']), ' ms')}"),
        ("ITL p50/p90", f"{_fmt(ms(j['itl_p50_s']), ' ms')} / {_fmt(ms(j['itl_p90_s']), ' ms')}"),
    ]
    for k, v in rows:
        tab.add_row(k, v)
    if j["missing"]:
        tab.add_row("not exported", ", ".join(j["missing"]))
    if j["parse_errors"]:
        tab.add_row("unreadable scrapes", f"{j['parse_errors']} ({j['last_parse_error']})")
    return tab


async def cmd_metrics(args: argparse.Namespace) -> int:
    config = get_config(args)
    name = safe_name(args.deployment or config.cluster)
    if args.count is not None and args.count < 1:
        raise CliExit(2, "--count must be 1 or more")
    w = _Watch(name)
    async with Cluster(config, journal=journal()) as cluster:
        reports = 0
        while True:
            try:
                j = await w.report(cluster, config, args.interval)
            except MetricsUnavailable as e:
                if not args.watch:
                    raise CliExit(
                        1, str(e), reason="no metrics", fix="sparktui status shows the deployment's state"
                    ) from None
                # a watcher keeps going: the engine may come back (a restart, a pivot to another port)
                j = w.gone(str(e))
            if args.json:
                print_json_line(j)
            elif j["reachable"]:
                console.print(render(j, w.t))
            else:
                err_console.print(f"metrics: {j['deployment']} unreachable: {j['error']}", markup=False)
            reports += 1
            if not args.watch or (args.count is not None and reports >= args.count):
                break
            if not j["reachable"]:
                await asyncio.sleep(args.interval)  # the next try, an interval on
    return 0


class _Watch:
    """The deployment's target and recent scrapes; forgotten when the engine stops answering."""

    def __init__(self, name: str):
        self.name, self.t, self.view = name, None, None

    async def report(self, cluster: Cluster, config, interval: float) -> dict:
        if self.t is None:  # first, or after the engine went away: locate again, two scrapes for the rates
            self.t = await locate(cluster, config, self.name)
            self.view = Serving(self.t.engine, self.t.version)
            self.view.add(await scrape(cluster[self.t.node], self.t))
        await asyncio.sleep(interval)
        self.view.add(await scrape(cluster[self.t.node], self.t))
        return {"deployment": self.name, "node": self.t.node, "reachable": True, **self.view.to_json()}

    def gone(self, why: str) -> dict:
        node, self.t = (self.t.node if self.t else None), None
        return {"deployment": self.name, "node": node, "reachable": False, "error": why}
