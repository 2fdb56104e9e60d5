"""The log fan-in benchmark runs end to end on a small flood and reports every figure it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_log_fanin_small_run():
    r = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "log_fanin.py"),
            "--nodes",
            "2",
            "--lines",
            "300",
            "--repeat",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    run = out["runs"][0]
    assert run["raw"]["lines"] == 600
    for reader in ("stream", "follower"):
        assert run[reader]["lines"] == 600 and run[reader]["dropped"] == 0  # every line reached the log view
        assert run[reader]["lines_per_s"] > 0 and run[reader]["ratio"] > 0
        assert set(run[reader]["latency_ms"]) == {"samples", "median", "p99"}
        assert run[reader]["no_keys"]["ratio"] > 0 and run[reader]["no_keys"]["dropped"] == 0
        assert out["median"][reader]["ratio"] == run[reader]["ratio"]
    assert out["peak_rss_mib"] > 0
