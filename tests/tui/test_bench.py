"""The log fan-in benchmark runs end to end on a small flood and reports every figure it promises."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_log_fanin_small_run():
    r = subprocess.run([sys.executable, str(REPO / "bench" / "log_fanin.py"), "--nodes", "2", "--lines", "300",
                        "--json"], capture_output=True, text=True, timeout=240, cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["raw"]["lines"] == 600
    for reader in ("stream", "follower"):
        assert out[reader]["lines"] == 600  # every line reached the log view
        assert out[reader]["lines_per_s"] > 0 and out[reader]["ratio"] > 0
        assert set(out[reader]["latency_ms"]) == {"samples", "median", "p99"}
    assert out["peak_rss_mib"] > 0
