"""What the memory guard's sampling costs: /proc/meminfo read on 8 nodes every interval, against the same
connections held with nothing read.

    python bench/memory_sampling.py [--nodes 8] [--window 20] [--repeat 3] [--interval 2] [--json]

The sampler is the guard's own reader (sparktui/core/memory/reader.py, `MemReader`) over sparktui's own
connections (core/remote/ssh.py `Cluster`): per node one long-lived remote shell (one SSH channel) that answers each
request line with /proc/meminfo and /proc/pressure/memory, using shell builtins only (no process started per
sample); every `--interval` seconds (config `memory.interval`, default 2 s) it asks each node.

The nodes are 8 in-process SSH servers on 127.0.0.1 in a child process (bench/sshnodes.py), so this process's
CPU is the sampler's alone. Windows of the two modes alternate, `--repeat` times: `none` (connections held,
nothing read) and `sampling`. Printed: this process's CPU in % of one core per mode side by side, and what
sampling adds over `none` (the goal: under 0.5 % of a core). Everything stays on 127.0.0.1; every loop ends with
its window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sshnodes import nodes_config, serve_nodes, start_child  # noqa: E402

GOAL_PCT = 0.5


def open_sampler(cluster, name: str):
    """What one node's sampling holds: the guard's reader (it opens its shell at the first reading)."""
    from sparktui.core.memory.reader import MemReader

    return MemReader(cluster[name])


async def sample_once(node: str, reader):
    """One reading of one node, as the guard takes it."""
    return await reader.sample()


async def _sample(samplers: list, interval: float, seconds: float) -> int:
    """Every node every interval (the nodes' ticks spread over it); returns how many samples were read."""
    count = 0
    end = time.monotonic() + seconds

    async def one(k: int, node: str, proc) -> None:
        nonlocal count
        await asyncio.sleep(interval * k / len(samplers))
        while time.monotonic() < end:
            s = await sample_once(node, proc)
            assert s.error is None and s.available, s
            count += 1
            await asyncio.sleep(max(0.0, min(interval, end - time.monotonic())))

    await asyncio.gather(*(one(k, node, proc) for k, (node, proc) in enumerate(samplers)))
    return count


async def bench(n: int, window: float, repeat: int, interval: float) -> dict:
    from sparktui.core.remote.ssh import Cluster

    with tempfile.TemporaryDirectory(prefix="sparktui-memsample-") as tmp:
        root = Path(tmp)
        child = start_child(
            [sys.executable, __file__, "--serve-nodes", str(root), "--nodes", str(n)], "the SSH servers"
        )
        try:
            config = nodes_config(root, "/models/m")
            async with Cluster(config) as cluster:
                samplers = [(x.name, open_sampler(cluster, x.name)) for x in config.nodes]
                await _sample(samplers, interval, min(window, 2 * interval))  # warm up: every shell is open
                rows = []
                for r in range(repeat):
                    for mode in ("none", "sampling"):
                        cpu0, t0 = time.process_time(), time.perf_counter()
                        samples = (
                            await _sample(samplers, interval, window)
                            if mode == "sampling"
                            else await asyncio.sleep(window) or 0
                        )
                        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
                        rows.append({"run": r, "mode": mode, "cpu_pct": 100 * cpu / wall, "samples": samples})
                for _, reader in samplers:
                    await reader.close()
        finally:
            child.stdin.close()
            child.wait(30)
    med = {m: statistics.median(x["cpu_pct"] for x in rows if x["mode"] == m) for m in ("none", "sampling")}
    return {
        "nodes": n,
        "interval_s": interval,
        "window_s": window,
        "rows": rows,
        "cpu_pct": med,
        "samples_per_window": statistics.median(x["samples"] for x in rows if x["mode"] == "sampling"),
        "cpu_pct_sampling_over_none": med["sampling"] - med["none"],
        "goal_pct": GOAL_PCT,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--serve-nodes", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_nodes:
        asyncio.run(serve_nodes(Path(a.serve_nodes), a.nodes))
        return 0
    s = asyncio.run(bench(a.nodes, a.window, a.repeat, a.interval))
    if a.json:
        print(json.dumps(s, indent=2))
        return 0
    c = s["cpu_pct"]
    extra = s["cpu_pct_sampling_over_none"]
    print(
        f"{s['nodes']} nodes, every {s['interval_s']:g} s, windows of {s['window_s']:g} s "
        f"({s['samples_per_window']:g} samples a window)"
    )
    print(
        f"sampler CPU, % of one core:  none {c['none']:.3f}   sampling {c['sampling']:.3f}   "
        f"sampling adds {extra:.3f} ({'within' if extra < GOAL_PCT else 'over'} the {GOAL_PCT:g} % goal)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
