"""Scale: the probe round and the idle TUI at 2, 8 and 32 demo nodes, against the 2-node run.

    python bench/scale.py [--nodes 2 8 32] [--repeat 3] [--idle 10] [--json]

Per node count: a fresh demo; the probe round is a second `take_inventory` on connected nodes
(what the TUI's 30 s poll does); the TUI is started as `sparktui` starts it, and once every card
has its facts its CPU share is measured over `--idle` seconds of nothing happening, with its RSS.
Ratios are against the 2-node figures of the same run. Everything stays on 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo_nodes import Demo, median, tui_to_facts  # noqa: E402


async def probe_rounds(config_path: str, repeat: int) -> list[float]:
    from sparktui.core.config.config import load_config
    from sparktui.core.nodes.inventory import take_inventory
    from sparktui.core.state.journal import Journal
    from sparktui.core.remote.ssh import Cluster

    cfg = load_config(config_path)
    out = []
    async with Cluster(cfg, Journal()) as cluster:
        inv = await take_inventory(cluster, cfg)  # connects; not counted
        if not inv.all_reachable:
            raise SystemExit("a demo node did not answer")
        for _ in range(repeat):
            t0 = time.perf_counter()
            await take_inventory(cluster, cfg)
            out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[2, 8, 32])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--idle", type=float, default=10.0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    res = {}
    for n in a.nodes:
        with Demo(n) as demo:
            rounds = asyncio.run(probe_rounds(demo.config, a.repeat))
            tuis = [tui_to_facts(demo.config, idle=a.idle) for _ in range(a.repeat)]
        res[n] = {
            "probe_round_s": median(rounds),
            "tui_facts_s": median([t["facts_s"] for t in tuis]),
            "idle_cpu_pct": median([100 * t["idle_cpu"] for t in tuis]),
            "tui_rss_mib": median([t["rss_mib"] for t in tuis]),
        }
    base = res[a.nodes[0]]
    for x in res.values():
        x["probe_round_vs_base"] = round(x["probe_round_s"] / base["probe_round_s"], 2)
        x["idle_cpu_vs_base"] = round(x["idle_cpu_pct"] / base["idle_cpu_pct"], 2) if base["idle_cpu_pct"] else None
    out = {"repeat": a.repeat, "idle_s": a.idle, "results": res, "load_avg": [round(x, 2) for x in os.getloadavg()]}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"scale on the demo, median of {a.repeat}; idle window {a.idle:g} s; load average {out['load_avg']}")
    for n, x in res.items():
        print(
            f"  {n:>2} nodes: probe round {x['probe_round_s']:.2f} s ({x['probe_round_vs_base']:.2f} x), "
            f"TUI facts {x['tui_facts_s']:.2f} s, idle CPU {x['idle_cpu_pct']:.2f} % of a core "
            f"({x['idle_cpu_vs_base']} x), TUI RSS {x['tui_rss_mib']:.0f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
