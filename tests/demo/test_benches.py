"""The demo benchmarks run end to end on a tiny setting and report every figure they promise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import require_namespaces

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _namespaces():
    require_namespaces()


def bench(name: str, *args: str) -> dict:
    r = subprocess.run(
        [sys.executable, str(REPO / "bench" / name), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_fanout_bench_copies_to_every_node_and_reports_the_ratio():
    out = bench("fanout.py", "--nodes", "3", "--repeat", "1", "--model-mb", "2", "--link-mbps", "16")
    x = out["results"]["3"]
    assert x["log2_rounds"] == 2 and x["ratio"] > 0
    assert x["runs"][0]["senders"] == ["spark1", "spark2"]  # the first copy sends the second


def test_coldstart_and_scale_benches_report_their_ratios():
    cold = bench("coldstart.py", "--repeat", "1")
    assert set(cold["median"]) == {
        "check_vs_openssh",
        "check_cpu_vs_openssh",
        "check_work_vs_openssh",
        "tui_vs_check",
        "version_vs_bare",
    }
    assert all(v > 0 for v in cold["median"].values())
    scale = bench("scale.py", "--nodes", "2", "--repeat", "1", "--idle", "0.5")
    x = scale["results"]["2"]
    assert x["probe_round_s"] > 0 and x["tui_facts_s"] > 0 and x["tui_rss_mib"] > 0
    assert x["probe_round_vs_base"] == 1.0
