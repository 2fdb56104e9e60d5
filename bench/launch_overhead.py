"""What launching through sparktui costs over launching by hand, on the real engine.

    sudo python3 bench/launch_overhead.py [--runs 3] [--json]

Two lab nodes (network namespaces with their own sshd and dockerd, tests/lab) and the image holding real vLLM
for CPUs (tools/build_engine_image.py) with a tiny checkpoint; the plan is native TP 2, one rank per node,
rendezvous on the fabric subnet. Each run launches the same plan twice, in alternating order:
- `sparktui`: `sparktui launch --wait` (SSH to both nodes, the plan's steps, its watch of the logs);
- `by hand`: the plan's exported scripts (`sparktui plan --export`), each run on its node in the order its
  README gives, the next once the one before returned (a worker's script waits for its rank's own line).
Both are timed from the start until the engine's /health answers 200 (polled every 0.2 s from here). The ratio
sparktui / by hand is printed per run and as the median. For the sparktui launches it also prints the lag from
the engine's own "Application startup complete." (its docker log timestamp) to the moment sparktui printed the
head's READY. Everything stays on the lab's own addresses; every loop has a deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.lab.netlab import Lab  # noqa: E402
from tests.lab.realengine import engine_image, engine_parts  # noqa: E402

DEPLOYMENT = "overhead"
ARGS = ["--engine", "vllm", "--mode", "native", "--tp", "2", "--arg=--enforce-eager"]
START_S = 900.0


def sparktui(cfg: Path, state: Path, *args: str, timeout: float = START_S + 60) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
    env.update(XDG_STATE_HOME=str(state), PYTHONUNBUFFERED="1", COLUMNS="200")
    return subprocess.Popen(
        [sys.executable, "-m", "sparktui", *args, "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def health_at(url: str, t0: float, deadline: float) -> float | None:
    """Seconds from t0 to the first /health 200, or None at the deadline."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() < deadline:
        try:
            with opener.open(url, timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.2)  # a poll from outside, as a user's client would
    return None


def startup_complete(lab: Lab) -> float | None:
    """The head's "Application startup complete." as a wall-clock time, from docker's own log timestamps."""
    name = f"sparktui-{DEPLOYMENT}-vllm-0"
    out = lab.sh(lab.nodes[0], ["docker", "logs", "-t", name], check=False)
    for line in (out.stdout + out.stderr).splitlines():
        if "Application startup complete" in line:
            stamp = line.split(" ", 1)[0]
            return datetime.fromisoformat(stamp[:26] + "+00:00").timestamp()
    return None


def clean(lab: Lab) -> None:
    lab.on_each(f"docker rm -f $(docker ps -aq --filter label=sparktui.deployment={DEPLOYMENT}) >/dev/null 2>&1; true")


def through_sparktui(lab: Lab, cfg: Path, state: Path, url: str) -> dict:
    t0 = time.monotonic()
    proc = sparktui(cfg, state, "launch", *ARGS, "--yes", "--wait", "--no-preflight", "--timeout", str(int(START_S)))
    ready_wall: list[float] = []

    def read() -> None:
        for line in proc.stdout:
            if "node1 ready" in line and not ready_wall:
                ready_wall.append(time.time())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    health = health_at(url, t0, t0 + START_S)
    proc.wait(timeout=START_S)
    reader.join(10)
    complete = startup_complete(lab)
    lag = ready_wall[0] - complete if ready_wall and complete else None
    return {"health_s": health, "ready_lag_s": lag, "rc": proc.returncode}


def by_hand(lab: Lab, scripts: list[tuple[str, Path]], url: str) -> dict:
    """The scripts in the README's order, each once the one before has returned: the plan's own order."""
    t0 = time.monotonic()

    def run_all() -> None:
        for node, script in scripts:
            lab.sh(node, ["sh", str(script)], timeout=START_S, check=False)

    runner = threading.Thread(target=run_all, daemon=True)
    runner.start()
    health = health_at(url, t0, t0 + START_S)
    runner.join(START_S)
    return {"health_s": health}


def readme_order(export: Path) -> list[tuple[str, str]]:
    """(node, script) as the exported README lists them ("  1. on node2: sh 1-node2.sh")."""
    out = []
    for line in (export / "README.txt").read_text().splitlines():
        head, sep, script = line.strip().partition(": sh ")
        if sep and head.split(".", 1)[0].isdigit():
            out.append((head.split(" on ", 1)[1], script))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("launch_overhead: the lab needs root (network namespaces, dockerd per node)")
    tar, checkpoint, _ = engine_parts()
    lab = Lab(2, storage="overlay2", docker_tmpfs="6g").up()
    work = Path(tempfile.mkdtemp(prefix="launch-overhead-"))
    rows = []
    try:
        lab.load_image(tar)
        for n in lab.nodes:
            shutil.copytree(checkpoint, n.path / "models" / lab.model)
        data = lab.config_data()
        data["cluster"] = DEPLOYMENT
        data["images"]["vllm"] = engine_image.DEFAULT_TAG
        cfg = lab.write_config(data, work / "sparktui.yaml")
        state = work / "state"
        export = work / "scripts"
        done = sparktui(cfg, state, "plan", *ARGS, "--export", str(export))
        out, _ = done.communicate(timeout=300)
        if done.returncode != 0:
            sys.exit(f"launch_overhead: plan --export failed:\n{out[-2000:]}")
        scripts = []
        for node, name in readme_order(export):  # each node runs its script from its own /tmp, copied there
            shutil.copy(export / name, lab.node(node).path / "tmp" / name)
            scripts.append((node, Path("/tmp") / name))
        if len(scripts) != len(lab.nodes):
            sys.exit(f"launch_overhead: the exported README lists {scripts}, not one script per node")
        url = f"http://{lab.nodes[0].mgmt_ip}:8000/health"
        for run in range(a.runs):
            order = ["sparktui", "by hand"] if run % 2 == 0 else ["by hand", "sparktui"]
            row = {"run": run + 1, "order": order}
            for way in order:
                clean(lab)
                row[way] = through_sparktui(lab, cfg, state, url) if way == "sparktui" else by_hand(lab, scripts, url)
            clean(lab)
            s, h = row["sparktui"]["health_s"], row["by hand"]["health_s"]
            row["ratio"] = s / h if s and h else None
            rows.append(row)
            if not a.json:
                lag = row["sparktui"]["ready_lag_s"]
                print(
                    f"run {run + 1} ({' then '.join(order)}): sparktui {s:.1f} s, by hand {h:.1f} s, "
                    f"ratio {row['ratio']:.3f}, READY lag {lag:.3f} s"
                    if s and h and lag is not None
                    else f"run {run + 1}: {json.dumps(row)}",
                    flush=True,
                )
    finally:
        clean(lab)
        lab.destroy()
        shutil.rmtree(work, ignore_errors=True)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    lags = [r["sparktui"]["ready_lag_s"] for r in rows if r["sparktui"]["ready_lag_s"] is not None]
    summary = {
        "runs": rows,
        "median_ratio": statistics.median(ratios) if ratios else None,
        "median_ready_lag_s": statistics.median(lags) if lags else None,
    }
    if a.json:
        print(json.dumps(summary, indent=1))
    else:
        print(
            f"median ratio sparktui / by hand: {summary['median_ratio']}; "
            f"median lag from the engine's startup line to READY: {summary['median_ready_lag_s']} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
