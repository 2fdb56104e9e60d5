"""What watching costs: sparktui's serving poller for 8 deployments, against the same run with polling off.

    python bench/serving_overhead.py [--deployments 8] [--window 20] [--repeat 3] [--interval 5] [--json]

Per deployment the poller does what the deployer does while an endpoint is ready (core/deploy/orchestrator.py
_health_loop / _serving): every `--interval` seconds (the deployer's HEALTH_INTERVAL_S) GET /health through
the SSH forward, then a /metrics scrape over the head's SSH connection (core/deploy/metrics_read.py), parsed
with prometheus_client and judged for `wedged` (core/deploy/serving.py ServingWatch), and the view's JSON.

Three processes, so each cost is counted where it belongs:
- this one: the poller, holding one SSH connection per node (its CPU time is what is measured);
- nodes: 8 in-process SSH servers on 127.0.0.1 (sparktui.demo.sshserver) that allow local forwards;
- engines: 8 simulated vLLM HTTP servers on 127.0.0.1 (sparktui.sim.httpapi: the same /metrics and
  completions as the simulator's engines; a 122B MoE on two Sparks, ~20 tokens/s a request) and, in the
  same process, the load: 2 clients per engine sending 16-token completions back to back.

The engines (with their load) are pinned to one half of the CPUs, the poller and the SSH servers to the other
half (on the real cluster the engines run on the Sparks, the poller on the laptop), and the deployments' ticks
are spread over the interval as deployments launched at different times are. Windows of three modes alternate, `--repeat` times: `none` (connections held, nothing polled), `health` (the
/health poll alone, what the deployer did before it read metrics) and `metrics` (/health, then the metrics
and the wedged judgement: the deployer now). Printed: the poller's CPU in % of one core per mode, what the
metrics add over `health` (the cost of watching the metrics) and over `none`, and request latency (p50, p99)
per mode with the ratios metrics/health and metrics/none. Everything stays on 127.0.0.0/8 and every loop
ends with its window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sshnodes import nodes_config, serve_nodes, start_child  # noqa: E402

CLIENTS_PER_ENGINE = 2
MAX_TOKENS = 16


# ---- nodes: a child process serving SSH ------------------------------------------------------------


async def _serve_nodes(root: Path, n: int) -> None:
    await serve_nodes(root, n, forwarding=True)


# ---- engines and their load: a child process -------------------------------------------------------


async def _serve_engines(root: Path, n: int) -> None:
    from sparktui.sim import httpapi

    servers, ports = [], []
    for i in range(n):
        st = httpapi.EngineState("vllm", "m", "/models/m", 32768, "0.33.0")
        st.kv_tokens, st.status = 400_000, "ready"  # timing: httpapi's default, a 122B MoE on two Sparks
        api = httpapi.ApiServer(st, lambda client, req: None)
        await api.start("127.0.0.1", 0)
        servers.append(api)
        ports.append(api._server.sockets[0].getsockname()[1])  # noqa: SLF001 - the port it got
    (root / "engines.json").write_text(json.dumps(ports))
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    while True:  # one window of load per line on stdin ("SECONDS"); ends when stdin closes
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        latencies = await _load(ports, float(line))
        print(json.dumps(latencies), flush=True)


async def _one(port: int) -> float:
    body = json.dumps({"prompt": "Explain tensor parallelism.", "max_tokens": MAX_TOKENS, "ignore_eos": True}).encode()
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    await writer.drain()
    await reader.read()  # until the server closes: the whole answer
    writer.close()
    return time.perf_counter() - t0


async def _load(ports: list[int], seconds: float) -> list[float]:
    end = time.monotonic() + seconds
    out: list[float] = []

    async def client(port: int) -> None:
        while time.monotonic() < end:
            out.append(await _one(port))

    await asyncio.gather(*(client(p) for p in ports for _ in range(CLIENTS_PER_ENGINE)))
    return out


# ---- this process: the poller ----------------------------------------------------------------------

CPUS_ENV = "SPARKTUI_BENCH_CPUS"  # "POLLER;ENGINES", comma lists: what the parent chose for its children


def _pin(which: int) -> None:
    """Keep this process on its half of the CPUs (0: the poller and the nodes, 1: the engines) where there
    are two or more: the engines run on the Sparks, not on the machine that watches them, so the poller's
    CPU must not show up as the engines' latency."""
    if not hasattr(os, "sched_setaffinity"):
        return
    if CPUS_ENV not in os.environ:
        mine = sorted(os.sched_getaffinity(0))
        if len(mine) < 2:
            return
        half = len(mine) // 2
        os.environ[CPUS_ENV] = ";".join(",".join(map(str, part)) for part in (mine[:half], mine[half:]))
    part = os.environ[CPUS_ENV].split(";")[which]
    os.sched_setaffinity(0, {int(c) for c in part.split(",")})


def _child(mode: str, root: Path, n: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARKTUI_SIM_SPEED="1")
    return start_child([sys.executable, __file__, f"--{mode}", str(root), "--deployments", str(n)], f"the {mode}", env)


def _config(root: Path):
    return nodes_config(root, "/models/m")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] if s else float("nan")


async def _poll(watches: list, interval: float, seconds: float, metrics: bool) -> int:
    """The deployer's health tick for every deployment, every `interval` s, for `seconds` (with the metrics
    read after each healthy answer when `metrics`); returns the healthy answers."""
    from sparktui.core.deploy.health import probe_health

    end = time.monotonic() + seconds
    scrapes = 0

    async def one(watch, local: int, offset: float) -> None:
        nonlocal scrapes
        await asyncio.sleep(offset)  # deployments are launched at different times: their ticks do not coincide
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(interval, left))  # the deployer's health_interval
            if time.monotonic() >= end:
                return
            ok, _, _ = await probe_health(f"http://127.0.0.1:{local}")
            if ok and not metrics:
                scrapes += 1
            elif ok:
                await watch.tick(local)
                watch.view.to_json()
                {
                    f: watch.view.series(f)[-120:]
                    for f in ("generation_tokens", "prompt_tokens", "kv_cache_usage", "running", "waiting")
                }
                scrapes += 1

    await asyncio.gather(*(one(w, local, i * interval / len(watches)) for i, (w, local) in enumerate(watches)))
    return scrapes


async def bench(n: int, window: float, repeat: int, interval: float) -> dict:
    from sparktui.core.deploy.metrics_read import Target
    from sparktui.core.deploy.serving import ServingWatch
    from sparktui.core.remote.ssh import Cluster

    with tempfile.TemporaryDirectory(prefix="sparktui-serving-bench-") as tmp:
        root = Path(tmp)
        nodes = _child("nodes", root, n)
        engines = _child("engines", root, n)
        ports = json.loads((root / "engines.json").read_text())
        config = _config(root)
        rows = []
        try:
            async with Cluster(config) as cluster:
                watches = []
                for i, port in enumerate(ports):
                    node = cluster[config.nodes[i].name]
                    local = await node.forward(port)
                    watch = ServingWatch(node, Target(f"d{i + 1}", "vllm", node.name, port, "0.33.0"), "m", None, 60.0)
                    watches.append((watch, local))
                loop = asyncio.get_running_loop()
                for r in range(repeat):
                    for mode in ("none", "health", "metrics"):
                        engines.stdin.write(f"{window}\n")
                        engines.stdin.flush()
                        cpu0, t0 = time.process_time(), time.perf_counter()
                        if mode == "none":
                            scrapes = 0
                            await asyncio.sleep(window)  # connections held, nothing polled
                        else:
                            scrapes = await _poll(watches, interval, window, mode == "metrics")
                        answer = await loop.run_in_executor(None, engines.stdout.readline)
                        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
                        lat = json.loads(answer)
                        rows.append(
                            {
                                "run": r,
                                "mode": mode,
                                "cpu_pct": 100 * cpu / wall,
                                "scrapes": scrapes,
                                "requests": len(lat),
                                "p50_ms": 1000 * pct(lat, 50),
                                "p99_ms": 1000 * pct(lat, 99),
                            }
                        )
        finally:
            for p in (engines, nodes):
                p.stdin.close()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()

    def med(mode: str, key: str) -> float:
        return statistics.median(x[key] for x in rows if x["mode"] == mode)

    modes = ("none", "health", "metrics")
    summary = {k: {m: med(m, k) for m in modes} for k in ("cpu_pct", "p50_ms", "p99_ms", "requests")}
    summary["polls_per_window"] = med("metrics", "scrapes")
    summary["cpu_pct_metrics_over_health"] = summary["cpu_pct"]["metrics"] - summary["cpu_pct"]["health"]
    summary["cpu_pct_metrics_over_none"] = summary["cpu_pct"]["metrics"] - summary["cpu_pct"]["none"]
    for k in ("p50_ms", "p99_ms"):
        summary[k]["ratio_metrics_health"] = summary[k]["metrics"] / summary[k]["health"]
        summary[k]["ratio_metrics_none"] = summary[k]["metrics"] / summary[k]["none"]
    return {
        "deployments": n,
        "window_s": window,
        "interval_s": interval,
        "repeat": repeat,
        "runs": rows,
        "summary": summary,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deployments", type=int, default=8)
    ap.add_argument("--window", type=float, default=20.0, help="seconds per window (default 20)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--interval",
        type=float,
        default=None,
        help="seconds between polls of one deployment (default: the deployer's HEALTH_INTERVAL_S)",
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--nodes", type=Path, help=argparse.SUPPRESS)  # child: the SSH servers
    ap.add_argument("--engines", type=Path, help=argparse.SUPPRESS)  # child: the engines and their load
    a = ap.parse_args()
    if a.nodes:
        _pin(0)
        asyncio.run(_serve_nodes(a.nodes, a.deployments))
        return 0
    if a.engines:
        _pin(1)
        asyncio.run(_serve_engines(a.engines, a.deployments))
        return 0
    from sparktui.core.deploy.health import HEALTH_INTERVAL_S

    _pin(0)

    out = asyncio.run(bench(a.deployments, a.window, a.repeat, a.interval or HEALTH_INTERVAL_S))
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    s = out["summary"]
    print(
        f"{a.deployments} deployments polled every {out['interval_s']:g} s, windows of {a.window:g} s, "
        f"{a.repeat} runs (medians)"
    )
    c = s["cpu_pct"]
    print(
        f"  poller CPU, % of one core: none {c['none']:.2f}, health {c['health']:.2f}, metrics {c['metrics']:.2f}; "
        f"metrics add {s['cpu_pct_metrics_over_health']:.2f} over health ({s['polls_per_window']:g} scrapes a "
        f"window), {s['cpu_pct_metrics_over_none']:.2f} over none"
    )
    for k in ("p50_ms", "p99_ms"):
        print(
            f"  request latency {k[:3]}, ms: none {s[k]['none']:.1f}, health {s[k]['health']:.1f}, metrics "
            f"{s[k]['metrics']:.1f}; ratio metrics/health {s[k]['ratio_metrics_health']:.3f}, "
            f"metrics/none {s[k]['ratio_metrics_none']:.3f}"
        )
    r = s["requests"]
    print(f"  requests a window: none {r['none']:g}, health {r['health']:g}, metrics {r['metrics']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
