"""Model fan-out on the demo's shared links: one copy to N-1 nodes against a single copy, same run.

    python bench/fanout.py [--nodes 4 8] [--repeat 3] [--model-mb 64] [--link-mbps 2] [--streams 1] [--json]

Each node of the simulated cluster has one link shared by every copy it sends (demo/link.py), as a
real NIC is. Per node count and per run: a fresh demo, `sync model --to spark2 --wait` (a single
copy, the baseline), that copy removed, then `sync model --wait` to every other node; the ratio
fan-out / single is what a user waits for N nodes in units of one copy (log2 rounds would be
ceil(log2 N)). The median over the runs is reported. Everything stays on 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def sparktui(*args: str, timeout: float = 900) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", *args], capture_output=True, text=True, env=ENV, timeout=timeout, cwd=ROOT
    )
    return time.perf_counter() - t0, r


def demo_up(nodes: int, model_mb: int, link_mbps: float) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparktui",
            "demo",
            "up",
            "--nodes",
            str(nodes),
            "--model-mb",
            str(model_mb),
            "--link-mbps",
            str(link_mbps),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=ENV,
        cwd=ROOT,
    )
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise SystemExit(f"the demo with {nodes} nodes did not start")
    return proc, json.loads(line)


def demo_down(proc: subprocess.Popen, summary: dict) -> None:
    sparktui("demo", "down", summary["id"], timeout=120)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


def one_run(nodes: int, model_mb: int, link_mbps: float, streams: int) -> dict:
    proc, demo = demo_up(nodes, model_mb, link_mbps)
    try:
        cfg = demo["config"]
        single, r = sparktui("--config", cfg, "sync", "model", "--to", "spark2", "--wait", "--json")
        if r.returncode != 0:
            raise SystemExit(f"single copy failed: {r.stderr[-500:]}")
        copy = Path(demo["root"]) / "nodes" / "spark2" / "models" / Path(demo["model_path"]).name
        shutil.rmtree(copy)  # spark2 is a destination again
        fan, r = sparktui("--config", cfg, "sync", "model", "--wait", "--json", "--streams", str(streams))
        if r.returncode != 0:
            raise SystemExit(f"fan-out failed: {r.stderr[-500:]}")
        outs = json.loads(r.stdout)
        if len(outs) != nodes - 1 or not all(o["ok"] for o in outs):
            raise SystemExit(f"fan-out incomplete: {outs}")
    finally:
        demo_down(proc, demo)
    return {
        "single_s": round(single, 2),
        "fanout_s": round(fan, 2),
        "ratio": round(fan / single, 2),
        "senders": sorted({o["source"] for o in outs}),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[4, 8])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--model-mb", type=int, default=64)
    p.add_argument("--link-mbps", type=float, default=2.0)
    p.add_argument("--streams", type=int, default=1, help="transfers per sender (sync --streams)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    out = {"model_mb": a.model_mb, "link_mbps": a.link_mbps, "streams": a.streams, "results": {}}
    for n in a.nodes:
        runs = [one_run(n, a.model_mb, a.link_mbps, a.streams) for _ in range(a.repeat)]
        out["results"][n] = {
            "runs": runs,
            "ratio": statistics.median(r["ratio"] for r in runs),
            "log2_rounds": math.ceil(math.log2(n)),
        }
    out["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    copy_s = a.model_mb * 1.048576 / a.link_mbps
    print(
        f"model fan-out on shared links: {a.model_mb} MiB at {a.link_mbps:g} MB/s per node link "
        f"(~{copy_s:.0f} s a copy), {a.streams} stream(s) per sender, median of {a.repeat}; load average {out['load_avg']}"
    )
    for n, x in out["results"].items():
        runs = ", ".join(f"{r['fanout_s']:.1f}/{r['single_s']:.1f} s" for r in x["runs"])
        print(
            f"  {n:>2} nodes: fan-out {x['ratio']:.2f} x a single copy (ceil(log2 N) = {x['log2_rounds']}); runs {runs}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
