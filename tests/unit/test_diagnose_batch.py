"""Feeding a batch of lines at once: the same milestones, problems and state as one line at a time."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparktui.core.diagnosis import dockerts
from sparktui.core.diagnosis.diagnose import Diagnoser

TESTS = Path(__file__).resolve().parents[1]
LOGS = sorted(p for p in TESTS.rglob("*.log") if p.stat().st_size < 2_000_000)
FILLER = [
    "[2026-01-01 00:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 8",
    "loading...",
    "",
    "   ",
    "INFO 03-02 11:00:00 [api_server.py:1] route /v1/models",
    "Error",
    "x" * 400,
    "résumé ünïcode",
]


def state(d: Diagnoser) -> tuple:
    nodes = {k: (v.lines, v.last_at, v.dist, v.weights_pct, sorted(map(str, v.seen))) for k, v in d._nodes.items()}
    return (d.to_json(), nodes, [repr(m) for m in d.milestones], [repr(p) for p in d.problems], d.ready)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_batches_of_a_recorded_log_give_what_line_by_line_gives(log):
    rnd = random.Random(log.name)
    rows = []
    for raw in log.read_text(errors="replace").splitlines():
        _, key, text = dockerts.split(raw)
        rows.append((text, None if key is None else key / 1e9))
        for _ in range(rnd.choice((0, 0, 1, 3))):  # quiet lines between, as a flood has them
            rows.append((rnd.choice(FILLER), rows[-1][1]))
    for engine in ("sglang", "vllm"):
        one = Diagnoser(engine, clock=lambda: 2e9, model_path="/models/m", expect=["n1"])
        many = Diagnoser(engine, clock=lambda: 2e9, model_path="/models/m", expect=["n1"])
        i = 0
        while i < len(rows):
            chunk = rows[i : i + rnd.choice((1, 7, 50, 400))]
            i += len(chunk)
            expected = [e for text, at in chunk for e in one.feed(text, "n1", now=at)]
            got = many.feed_batch([t for t, _ in chunk], "n1", [at for _, at in chunk])
            assert [repr(e) for e in got] == [repr(e) for e in expected]
            assert one.tick(now=2e9) == many.tick(now=2e9)
        assert state(many) == state(one)


def test_a_flood_of_lines_that_match_nothing_is_only_counted():
    d = Diagnoser("sglang", clock=lambda: 0.0)
    d.feed("[2026-01-01 00:00:00 TP0] Init torch distributed begin.", "n1", now=1.0)
    quiet = [f"[2026-01-01 00:00:00 TP0] step {i}" for i in range(1000)]
    assert d.feed_batch(quiet, "n1", [2.0] * 1000) == []
    assert d._nodes["n1"].lines == 1001 and d.phases.nodes["n1"].last_text.endswith("step 999")
    hung = d.feed_batch(["[2026-01-01 00:00:00 TP0] still here"], "n1", [500.0])  # silence is still judged
    assert [p.kind for p in hung] == ["rendezvous_hang"]
