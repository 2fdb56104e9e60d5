"""What the memory guard's sampling costs: /proc/meminfo read on 8 nodes every interval, against the same
connections held with nothing read.

    python bench/memory_sampling.py [--nodes 8] [--window 20] [--repeat 3] [--interval 2] [--json]

Per node the sampler keeps one long-lived remote shell (one SSH channel) that answers each request line with
the file's contents, using shell builtins only (no process started per sample):

    while IFS= read -r _; do while IFS= read -r l; do printf '%s\\n' "$l"; done </proc/meminfo; printf '@@end\\n'; done

and every `--interval` seconds (config `memory.interval`, default 2 s) it asks each node and parses the answer
into a MemSample (sparktui.core.memory.sample). `sample_once` is the one call to point at the guard's reader
once it is in (sparktui/core/memory/reader.py); `open_sampler` opens what it needs per node.

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

LOOP = ("while IFS= read -r _; do while IFS= read -r l; do printf '%s\\n' \"$l\"; done </proc/meminfo; "
        "printf '@@end\\n'; done")
GOAL_PCT = 0.5


async def open_sampler(conn):
    """What one node's sampling holds open: the remote shell answering requests."""
    return await conn.create_process(LOOP, encoding="utf-8")


async def sample_once(node: str, proc):
    """One reading of one node (the stand-in for the guard's reader)."""
    from sparktui.core.memory.sample import parse_sample

    proc.stdin.write("\n")
    text = await asyncio.wait_for(proc.stdout.readuntil("@@end\n"), 10)  # one read, not one per line
    return parse_sample(node, time.time(), text, None)


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
    import asyncssh

    with tempfile.TemporaryDirectory(prefix="sparktui-memsample-") as tmp:
        root = Path(tmp)
        child = start_child([sys.executable, __file__, "--serve-nodes", str(root), "--nodes", str(n)],
                            "the SSH servers")
        try:
            config = nodes_config(root, "/models/m")
            conns = [await asyncssh.connect(x.host, port=x.port, username=x.user, client_keys=[x.identity_file],
                                            known_hosts=config.ssh.known_hosts) for x in config.nodes]
            samplers = [(x.name, await open_sampler(c)) for x, c in zip(config.nodes, conns)]
            await _sample(samplers, interval, min(window, 2 * interval))  # warm up
            rows = []
            for r in range(repeat):
                for mode in ("none", "sampling"):
                    cpu0, t0 = time.process_time(), time.perf_counter()
                    samples = await _sample(samplers, interval, window) if mode == "sampling" else \
                        await asyncio.sleep(window) or 0
                    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
                    rows.append({"run": r, "mode": mode, "cpu_pct": 100 * cpu / wall, "samples": samples})
            for _, p in samplers:
                p.stdin.write_eof()
                p.close()
            for c in conns:
                c.close()
        finally:
            child.stdin.close()
            child.wait(30)
    med = {m: statistics.median(x["cpu_pct"] for x in rows if x["mode"] == m) for m in ("none", "sampling")}
    return {"nodes": n, "interval_s": interval, "window_s": window, "rows": rows, "cpu_pct": med,
            "samples_per_window": statistics.median(x["samples"] for x in rows if x["mode"] == "sampling"),
            "cpu_pct_sampling_over_none": med["sampling"] - med["none"], "goal_pct": GOAL_PCT}


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
    print(f"{s['nodes']} nodes, every {s['interval_s']:g} s, windows of {s['window_s']:g} s "
          f"({s['samples_per_window']:g} samples a window)")
    print(f"sampler CPU, % of one core:  none {c['none']:.3f}   sampling {c['sampling']:.3f}   "
          f"sampling adds {extra:.3f} ({'within' if extra < GOAL_PCT else 'over'} the {GOAL_PCT:g} % goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
