"""What the benchmarks share: a demo cluster started and stopped around a run, a TUI child that
reports when every card has its facts, and medians. Everything stays on 127.0.0.0/8."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATE = tempfile.mkdtemp(prefix="sparktui-bench-state-")  # the benches' journal, not the user's
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": STATE}


def sparktui(*args: str, timeout: float = 900) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", *args], capture_output=True, text=True, env=ENV, timeout=timeout, cwd=ROOT
    )
    return time.perf_counter() - t0, r


class Demo:
    """`sparktui demo up --json` for the length of a `with` block."""

    def __init__(self, nodes: int, *extra: str) -> None:
        self.nodes, self.extra = nodes, extra
        self.proc: subprocess.Popen | None = None
        self.info: dict = {}

    def __enter__(self) -> "Demo":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sparktui", "demo", "up", "--nodes", str(self.nodes), *self.extra, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            env=ENV,
            cwd=ROOT,
        )
        line = self.proc.stdout.readline()  # the demo prints its summary once every node is up
        if not line:
            self.proc.kill()
            raise SystemExit(f"the demo with {self.nodes} nodes did not start")
        self.info = json.loads(line)
        return self

    @property
    def config(self) -> str:
        return self.info["config"]

    def __exit__(self, *exc) -> None:
        sparktui("demo", "down", self.info["id"], timeout=120)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


TUI_CHILD = r"""
import resource, sys, time
from sparktui.core.config.config import load_config
from sparktui.tui.controller import Controller

config = load_config(sys.argv[1]); idle = float(sys.argv[2])
controller = Controller(config)
controller.prestart()  # as `sparktui` does: the probes start before the screen's code loads
from sparktui.tui.app import SparkApp

def tell(line):
    # past Textual's capture of print(), which holds a piped stdout until the app ends
    # unless PYTHONUNBUFFERED is set
    sys.__stdout__.write(line + "\n")
    sys.__stdout__.flush()

class Probe(SparkApp):
    def on_mount(self):
        # Textual calls SparkApp.on_mount too (a handler per class of the MRO): calling it here as
        # well would start a second probe round
        self._bench_told = False
        self._bench_ticker = self.set_interval(0.01, self._bench_check)

    def _bench_check(self):
        if self._bench_told:
            return
        cards = [self.nodes_pane.card(n.name) for n in config.nodes]
        if all(getattr(c, "facts", None) is not None for c in cards):
            self._bench_told = True
            self._bench_ticker.stop()  # the idle measure must not count this check
            tell("FACTS")
            if idle <= 0:  # time to facts only
                self.exit()
                return
            self.set_timer(2.0, self._bench_settled)  # what the facts set off (cards, journal rows) ends first

    def _bench_settled(self):
        self._bench_cpu = time.process_time()
        self.set_timer(idle, self._bench_done)

    def _bench_done(self):
        used = time.process_time() - self._bench_cpu
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        tell(f"IDLE {used / idle:.5f} {rss:.1f}")
        self.exit()

Probe(config, controller=controller).run(headless=True, size=(120, 40))
"""


def tui_to_facts(config: str, idle: float = 0.0, timeout: float = 300) -> dict:
    """Seconds from starting the TUI process to facts on every card; with `idle`, the share of a core
    the TUI then uses while nothing happens, and its peak RSS."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-c", TUI_CHILD, config, str(idle)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=ENV,
        cwd=ROOT,
    )
    out: dict = {}
    killer = threading.Timer(timeout, p.kill)  # a child that never reports is stopped, and the run goes on
    killer.start()
    try:
        for line in p.stdout:
            if line.startswith("FACTS"):
                out["facts_s"] = time.perf_counter() - t0
            elif line.startswith("IDLE"):
                _, cpu, rss = line.split()
                out["idle_cpu"], out["rss_mib"] = float(cpu), float(rss)
                break
            if idle <= 0 and "facts_s" in out:
                break
    finally:
        killer.cancel()
        p.kill()
        p.wait()
    return out


def median(values) -> float:
    return round(statistics.median(values), 3)
