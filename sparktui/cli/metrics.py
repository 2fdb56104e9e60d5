"""`sparktui metrics [--watch] [--json]`: the serving view of a deployment, from the engine's /metrics.

Read on the head node through sparktui's SSH connection; two scrapes --interval apart give the rates
(tokens/s) and the latency quantiles of what was served between them.
"""
from __future__ import annotations

import argparse
import asyncio

from rich.table import Table

from ..core import argcheck
from ..core.deploy.metrics_read import MetricsUnavailable, Target, locate, scrape
from ..core.engines.common import safe_name
from ..core.metrics import Serving
from ..core.ssh import Cluster
from .common import CliExit, add_config_arg, add_json_arg, checked, console, get_config, journal
from .deploy import print_json_line


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="tokens/s, requests, KV-cache use and latency quantiles from the engine")
    p.add_argument("--deployment", help="deployment name (default: the cluster name)")
    p.add_argument("--watch", action="store_true", help="keep printing every --interval seconds (Ctrl-C stops)")
    p.add_argument("--interval", type=checked(argcheck.seconds), default=2.0, metavar="S",
                   help="seconds between scrapes (default 2)")
    p.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N reports")
    add_json_arg(p)
    add_config_arg(p)
    p.set_defaults(func=cmd_metrics)


def _fmt(v, unit: str = "", nd: int = 1) -> str:
    return "—" if v is None else f"{v:.{nd}f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def render(j: dict, t: Target) -> Table:
    tab = Table(title=f"{t.deployment} · {j['engine']} on {t.node}:{t.port}", show_header=False, box=None)
    ms = lambda v: None if v is None else v * 1000  # noqa: E731
    rows = [("generation", _fmt(j["generation_tokens_per_s"], " tok/s")),
            ("prompt", _fmt(j["prompt_tokens_per_s"], " tok/s")),
            ("requests", f"{_fmt(j['running'])} running · {_fmt(j['waiting'])} waiting"),
            ("KV cache", _fmt(None if j["kv_cache_usage"] is None else j["kv_cache_usage"] * 100, " %")),
            ("TTFT p50/p90", f"{_fmt(ms(j['ttft_p50_s']), ' ms')} / {_fmt(ms(j['ttft_p90_s']), ' ms')}"),
            ("ITL p50/p90", f"{_fmt(ms(j['itl_p50_s']), ' ms')} / {_fmt(ms(j['itl_p90_s']), ' ms')}")]
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
    async with Cluster(config, journal=journal()) as cluster:
        try:
            t = await locate(cluster, config, name)
            view = Serving(t.engine, t.version)
            node = cluster[t.node]
            view.add(await scrape(node, t))
            reports = 0
            while True:
                await asyncio.sleep(args.interval)
                view.add(await scrape(node, t))
                j = {"deployment": name, "node": t.node, **view.to_json()}
                if args.json:
                    print_json_line(j)
                else:
                    console.print(render(j, t))
                reports += 1
                if not args.watch or (args.count is not None and reports >= args.count):
                    break
        except MetricsUnavailable as e:
            raise CliExit(1, str(e), reason="no metrics", fix="sparktui status shows the deployment's state") from None
    return 0
