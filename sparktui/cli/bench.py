"""`sparktui bench [--concurrency 1,8,32] [--input-len N] [--output-len N] [--json]` and `bench --history`.

The client (`vllm bench serve`, see core/bench/client.py) runs on the head node, detached; progress is read
from its log. Ctrl-C stops it there. Each run's rows are kept in the local history.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time

from rich.table import Table
from rich.text import Text

from ..core.bench import client, results
from ..core.bench.run import BenchError, prepare, run
from ..core.engines.common import safe_name
from ..core.remote.ssh import Cluster
from .deploy import _Term
from .common import CliExit, add_config_arg, add_json_arg, console, err_console, get_config, journal, print_json

COLUMNS = [
    ("engine", "engine", "{}"),
    ("conc", "concurrency", "{}"),
    ("TTFT p50 ms", "ttft_p50_ms", "{:.1f}"),
    ("TTFT p99 ms", "ttft_p99_ms", "{:.1f}"),
    ("ITL p50 ms", "itl_p50_ms", "{:.1f}"),
    ("out tok/s", "output_tokens_per_s", "{:.1f}"),
    ("req/s", "requests_per_s", "{:.2f}"),
]


def concurrency_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of whole numbers such as 1,8,32") from None
    if not out or any(c < 1 or c > 4096 for c in out):
        raise argparse.ArgumentTypeError(f"{text!r}: each concurrency is a whole number from 1 to 4096")
    return sorted(set(out))


def length(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens") from None
    if not 1 <= n <= 1 << 20:
        raise argparse.ArgumentTypeError(f"{n} tokens: give 1 to 1048576")
    return n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure serving on the head node (TTFT, ITL, tokens/s per concurrency)")
    p.add_argument("--deployment", help="deployment name (default: the cluster name)")
    p.add_argument(
        "--concurrency",
        type=concurrency_list,
        default=[1, 8, 32],
        metavar="1,8,32",
        help="requests in flight, one run each (default 1,8,32)",
    )
    p.add_argument("--input-len", type=length, default=512, metavar="N", help="prompt tokens (default 512)")
    p.add_argument("--output-len", type=length, default=128, metavar="N", help="tokens generated (default 128)")
    p.add_argument("--history", action="store_true", help="list the kept results instead of running")
    p.add_argument("--last", type=int, default=20, metavar="N", help="with --history: the last N runs (default 20)")
    add_json_arg(p)
    add_config_arg(p)
    p.set_defaults(func=cmd_bench)


def table(rows: list[results.Row], title: str) -> Table:
    tab = Table(title=Text(title))
    for head, _, _ in COLUMNS:
        tab.add_column(head, justify="left" if head == "engine" else "right")
    for r in rows:
        d = r.to_json()
        tab.add_row(*(Text(fmt.format(d[key])) for _, key, fmt in COLUMNS))  # the file's strings: never markup
    return tab


def run_title(g: list[results.Row]) -> str:
    r = g[0]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started))
    mark = f"TAINTED ({r.tainted}) · " if r.tainted else ""
    return (
        f"{mark}{r.deployment} · {r.engine} {r.mode} TP{r.tp} · {r.image or 'image ?'} · plan {r.plan_id or '?'}"
        f" · {r.input_len}/{r.output_len} tokens · {when}"
    )


def history(args: argparse.Namespace) -> int:
    if args.last < 1:
        raise CliExit(2, "--last must be 1 or more")
    # read from the end: the last runs only, however long the file has grown
    rows, problems = results.load(last=args.last, deployment=safe_name(args.deployment) if args.deployment else None)
    for p in problems:
        err_console.print(p, markup=False, soft_wrap=True)
    if args.json:
        print_json(
            {
                "rows": [r.to_json() for r in rows],
                "problems": problems,
                "file": str(results.history_path()),
                "last": args.last,
            }
        )
        return 0
    if not rows:
        console.print(f"no benchmark results kept yet ({results.history_path()}); `sparktui bench` makes some")
    for g in results.runs(rows):
        console.print(table(g, run_title(g)))
    return 0


async def cmd_bench(args: argparse.Namespace) -> int:
    if args.history:
        return history(args)
    config = get_config(args)
    name = safe_name(args.deployment or config.cluster)
    w = client.Workload(args.concurrency, args.input_len, args.output_len)
    last = [""]

    def shown(p: client.Progress) -> None:
        words = p.words()
        if words != last[0]:
            last[0] = words
            err_console.print(f"bench: {words}", markup=False)

    # SIGTERM or a hangup ends the run as Ctrl-C does: cancelled, so the client on the head is stopped first
    term = _Term((signal.SIGTERM, signal.SIGHUP))
    async with Cluster(config, journal=journal()) as cluster:
        try:
            b = await prepare(cluster, config, name)
            err_console.print(
                f"bench: {b.target.engine} on {b.target.node} ({b.model}), client `vllm bench serve` "
                f"on the node, concurrency {','.join(map(str, w.concurrency))}",
                markup=False,
            )
            rows = await run(cluster, config, b, w, shown)
        except BenchError as e:
            raise CliExit(1, str(e), reason=e.reason, fix=e.fix) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            err_console.print("bench: stopped; the client on the head was stopped too", markup=False)
            if term.fired:  # a cancelled task would end in a traceback; 143 is the shell's code for SIGTERM
                raise CliExit(143) from None
            raise
        finally:
            term.remove()
    results.append(rows)
    other = results.beside(results.load(deployment=name)[0], name)[1]
    tainted = rows[0].tainted if rows else ""
    if tainted:
        err_console.print(
            f"bench: tainted run ({tainted}): kept in the history, not compared with clean runs",
            markup=False,
            soft_wrap=True,
        )
    if args.json:
        print_json(
            {
                "deployment": name,
                "rows": [r.to_json() for r in rows],
                "tainted": tainted,
                "previous_engine": [r.to_json() for r in other],
            }
        )
        return 0
    console.print(table(rows, run_title(rows)))
    if other:
        console.print(table(other, "before the pivot: " + run_title(other)))
    return 0
