"""Log fan-in benchmark: 8 remote streams over SSH into the TUI's log view, against raw asyncssh reads.

    python bench/log_fanin.py [--nodes 8] [--lines 100000] [--repeat 3] [--json]

From one run it prints:
- lines per second read with plain asyncssh (create_process, `async for line in stdout`);
- lines per second through the app, read on the controller's core thread either with Node.stream in
  batches or with the deployer's LogFollower (timestamps parsed, deduplicated), then EventBus -> Textual messages ->
  LogView -> Log), and the ratio of the two;
- key-press to repaint latency while the flood runs (`f` toggles follow; the time from the key
  until the next frame is composed), median and p99;
- the same flood through the app with no key pressed: each key holds the readers while the screen
  answers it, so the pressed run's rate says what keys cost and this one what the reading does;
- the app process's peak memory (RSS). The SSH servers run in a child process so their memory
  and CPU are not counted as the app's.

Nodes are in-process asyncssh servers on 127.0.0.1 (sparktui.demo.sshserver) that run each command
in a local subprocess; every stream prints a fixed number of lines, so the run ends by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sshnodes import nodes_config, serve_nodes, start_child  # noqa: E402

LINE = (
    "2026-01-01T00:00:00.%09dZ [2026-01-01 00:00:00 TP%d] Loading safetensors checkpoint shards: "
    "%d%% Completed | %d/%d [00:02<00:19, 2.86s/it] avail mem=59.10 GB"
)
READERS = {  # how the core reads each node, as the app would get it
    "stream": "through the app (Node.stream)",
    "follower": "through the app (deploy LogFollower)",
}
LATENCY_SAMPLES = 40  # key presses during the flood, at most
LATENCY_GAP = 0.05  # seconds between presses


def stream_command(lines: int, rank: int) -> str:
    """What `docker logs -t` prints for a container that wrote `lines` lines (the shim runs this)."""
    prog = f'BEGIN{{for(i=1;i<={lines};i++) printf "{LINE}\\n", i, {rank}, i%100, i, {lines}}}'
    return "awk " + shlex.quote(prog)


def docker_shim(lines: int) -> str:
    """`docker logs -t [-f] CONTAINER` on a bench node: the flood, then the end of the container."""
    return (
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  logs) exec {stream_command(lines, 0)} ;;\n"
        "  inspect) echo exited ;;\n"
        '  *) echo "docker $1: not part of the bench" >&2; exit 1 ;;\n'
        "esac\n"
    )


# ---- the nodes: a child process serving SSH on 127.0.0.1 --------------------------------------


async def _serve(root: Path, n: int, lines: int) -> None:
    shims = root / "bin"
    shims.mkdir()
    (shims / "docker").write_text(docker_shim(lines))
    (shims / "docker").chmod(0o755)
    await serve_nodes(root, n, env={"PATH": f"{shims}:{os.environ.get('PATH', '/usr/bin:/bin')}"})


def start_servers(root: Path, n: int, lines: int) -> subprocess.Popen:
    return start_child(
        [sys.executable, __file__, "--serve", str(root), "--nodes", str(n), "--lines", str(lines)], "the SSH servers"
    )


def make_config(root: Path):
    return nodes_config(root, "/nonexistent")


# ---- raw asyncssh ------------------------------------------------------------------------------


async def raw_read(config, lines: int) -> tuple[int, float]:
    import asyncssh

    async def one(i: int, node) -> int:
        async with asyncssh.connect(
            node.host,
            port=node.port,
            username=node.user,
            client_keys=[node.identity_file],
            known_hosts=config.ssh.known_hosts,
            config=[],
        ) as conn:
            proc = await conn.create_process("docker logs -t flood", encoding="utf-8", errors="replace")
            count = 0
            async for line in proc.stdout:
                if line:
                    count += 1
            await proc.wait_closed()
            return count

    t0 = time.perf_counter()
    counts = await asyncio.gather(*(one(i, n) for i, n in enumerate(config.nodes)))
    return sum(counts), time.perf_counter() - t0


# ---- through the app ---------------------------------------------------------------------------


def build_app(config, lines: int, reader: str):
    from sparktui.core.deploy.logstream import LogFollower
    from sparktui.core.state.events import ConnectionChanged, Gate, LogLines
    from sparktui.core.state.journal import Journal
    from sparktui.core.remote.ssh import Cluster
    from sparktui.tui.app import SparkApp
    from sparktui.tui.controller import Controller

    class FloodController(Controller):
        """Connects for real, then reads every node's container log with the deployer's own LogFollower
        (docker logs -t, timestamps split, deduplicated, batched), on the controller's core thread."""

        def __init__(self, cfg, reader: str) -> None:
            super().__init__(cfg, journal=Journal())
            self.reader = reader
            self.connected = threading.Event()
            self.go = threading.Event()
            self.started_at = 0.0
            self.streamed = 0

        async def _start(self) -> None:
            self.cluster = Cluster(self.config, self.journal)
            await self.cluster.connect_all()
            for node in self.cluster:
                self.bus.emit(ConnectionChanged(node.name, node.connected, node.error))
            self.connected.set()
            await asyncio.get_running_loop().run_in_executor(None, self.go.wait)
            self.started_at = time.perf_counter()
            await asyncio.gather(*(self._follow(node) for node in self.cluster))

        async def _follow(self, node) -> None:
            if self.reader == "follower":
                gate = Gate()

                def on_lines(batch) -> None:  # Deployer._on_lines, less the diagnosis (Diagnoser.feed_batch)
                    self.bus.emit(LogLines(node.name, "flood", batch.texts, batch.keys, flow=gate))
                    self.streamed += len(batch)

                await LogFollower(node, "flood", on_lines, follow=False, gate=gate).run()
                return
            gate = Gate()  # plain Node.stream line by line, batched (500 lines / 50 ms), same back-pressure
            buf: list[str] = []
            last = time.perf_counter()
            async for line in node.stream("docker logs -t flood"):
                buf.append(line)
                now = time.perf_counter()
                if len(buf) >= 500 or now - last >= 0.05:
                    self.bus.emit(LogLines(node.name, "flood", buf, flow=gate))
                    self.streamed += len(buf)
                    buf, last = [], now
                    if gate.over:
                        await gate.wait()
            if buf:
                self.bus.emit(LogLines(node.name, "flood", buf, flow=gate))
                self.streamed += len(buf)

    class BenchApp(SparkApp):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            self.paint_waiter: asyncio.Future | None = None
            self.acted = False

        def action_follow(self) -> None:
            super().action_follow()
            self.acted = True

        def _display(self, screen, renderable) -> None:
            super()._display(screen, renderable)
            w = self.paint_waiter
            if self.acted and renderable is not None and w is not None and not w.done():
                w.set_result(time.perf_counter())

    controller = FloodController(config, reader)
    return BenchApp(config, controller=controller, autostart=False), controller


async def through_app(config, lines: int, reader: str, keys: bool = True) -> dict:
    gc.collect()  # the runs share this process (the TUI has one to itself): each app starts on a collected heap
    app, ctl = build_app(config, lines, reader)
    total = lines * len(config.nodes)
    latencies: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.show_pane("pane-launch")
        app.run_worker(ctl.start(), name="flood")  # autostart is off: the bench says when
        limit = time.monotonic() + 30
        while not ctl.connected.is_set():
            if time.monotonic() > limit:
                raise SystemExit("the nodes did not connect")
            await asyncio.sleep(0.01)
        view = app.launch_pane.log
        # The flood starts on a settled screen (pane switch, footer and focus done): the presses measure
        # the flood, not the app's first layout.
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        ctl.go.set()
        deadline = time.monotonic() + 600  # a bound, not a pace: the run ends when every line is shown
        while keys and ctl.streamed < total and len(latencies) < LATENCY_SAMPLES and time.monotonic() < deadline:
            await asyncio.sleep(LATENCY_GAP)
            if not ctl.started_at or ctl.streamed >= total:
                continue
            loop = asyncio.get_running_loop()
            app.acted, app.paint_waiter = False, loop.create_future()
            pressed = time.perf_counter()
            app.simulate_key("f")
            try:
                painted = await asyncio.wait_for(app.paint_waiter, 10)
                latencies.append(painted - pressed)
            except asyncio.TimeoutError:
                latencies.append(float("inf"))
        if not view.following:
            view.follow(True)
        while view.received + view.dropped < total and time.monotonic() < deadline:
            await pilot.pause(0.01)
        view.flush_now()
        elapsed = time.perf_counter() - ctl.started_at
        received, dropped = view.received, view.dropped
        await ctl.close()
    return {"lines": received, "dropped": dropped, "seconds": elapsed, "latencies": latencies}


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


async def one_run(config, lines: int) -> dict:
    raw_lines, raw_s = await raw_read(config, lines)
    raw_rate = raw_lines / raw_s
    out = {"raw": {"lines": raw_lines, "seconds": round(raw_s, 3), "lines_per_s": round(raw_rate)}}
    for reader in READERS:
        # Each key holds the readers while the screen answers it, so the flood with a key every
        # LATENCY_GAP measures the keys; the same flood with no key pressed measures the reading.
        quiet = await through_app(config, lines, reader, keys=False)
        quiet_rate = quiet["lines"] / quiet["seconds"]
        app = await through_app(config, lines, reader)
        lat = [x * 1000 for x in app["latencies"]]
        rate = app["lines"] / app["seconds"]
        out[reader] = {
            "no_keys": {
                "lines": quiet["lines"],
                "lines_per_s": round(quiet_rate),
                "ratio": round(quiet_rate / raw_rate, 3),
                "dropped": quiet["dropped"],
            },
            "lines": app["lines"],
            "dropped": app["dropped"],
            "seconds": round(app["seconds"], 3),
            "lines_per_s": round(rate),
            "ratio": round(rate / raw_rate, 3),
            "latency_ms": {
                "samples": len(lat),
                "median": round(statistics.median(lat), 1) if lat else None,
                "p99": round(pct(lat, 99), 1) if lat else None,
            },
        }
    return out


def median_of(runs: list[dict], *path: str):
    values = []
    for r in runs:
        for p in path:
            r = r[p]
        if r is not None:
            values.append(r)
    return round(statistics.median(values), 3) if values else None


async def bench(n: int, lines: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="sparktui-bench-") as tmp:
        root = Path(tmp)
        servers = start_servers(root, n, lines)
        try:
            config = make_config(root)
            runs = [await one_run(config, lines) for _ in range(repeat)]
        finally:
            servers.stdin.close()
            servers.wait(10)
    med = {"raw": {"lines_per_s": median_of(runs, "raw", "lines_per_s")}}
    for reader in READERS:
        med[reader] = {k: median_of(runs, reader, k) for k in ("lines_per_s", "ratio", "dropped")}
        med[reader]["latency_ms"] = {k: median_of(runs, reader, "latency_ms", k) for k in ("median", "p99")}
        med[reader]["no_keys"] = {k: median_of(runs, reader, "no_keys", k) for k in ("lines_per_s", "ratio")}
    return {
        "nodes": n,
        "lines_per_node": lines,
        "repeat": repeat,
        "runs": runs,
        "median": med,
        "lines_through_app": sum(r[x]["lines"] + r[x]["no_keys"]["lines"] for r in runs for x in READERS),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--lines", type=int, default=100_000, help="lines per node")
    p.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    p.add_argument("--json", action="store_true")
    p.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.serve:
        asyncio.run(_serve(Path(a.serve), a.nodes, a.lines))
        return 0
    r = asyncio.run(bench(a.nodes, a.lines, a.repeat))
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    total = a.nodes * a.lines
    m = r["median"]
    print(
        f"log fan-in: {a.nodes} nodes x {a.lines:,} lines of `docker logs -t` over SSH on 127.0.0.1 "
        f"({total:,} lines), median of {a.repeat} runs; load average {r['load_avg']}"
    )
    print(f"  {'raw asyncssh reads (line by line)':<38}{m['raw']['lines_per_s']:>10,.0f} lines/s   (the baseline)")
    for reader in READERS:
        x = m[reader]
        lat = x["latency_ms"]
        print(
            f"  {READERS[reader]:<38}{x['lines_per_s']:>10,.0f} lines/s   ratio {x['ratio']:.2f}  "
            f"dropped {x['dropped']:,.0f}"
        )
        print(
            f"  {'':<38}key -> repaint median {lat['median']} ms, p99 {lat['p99']} ms "
            f"(a key every {LATENCY_GAP * 1000:.0f} ms)"
        )
        q = x["no_keys"]
        print(f"  {'  the same, no key pressed':<38}{q['lines_per_s']:>10,.0f} lines/s   ratio {q['ratio']:.2f}")
    print(
        f"  {'peak memory (RSS)':<38}{r['peak_rss_mib']} MiB after {r['lines_through_app']:,} lines through the "
        "app (this process; the SSH servers run in a child)"
    )
    print(
        "  per run: "
        + "; ".join(
            f"raw {x['raw']['lines_per_s']:,}, "
            + ", ".join(f"{k} {x[k]['ratio']:.2f} ({x[k]['no_keys']['ratio']:.2f} no keys)" for k in READERS)
            for x in r["runs"]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
