"""The corpus of real logs (tests/corpus): its score, its metadata, and the streaming reader's fast path."""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path

import pytest

from sparktui.core.diagnosis import logfile
from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.diagnosis.phases import PHASES

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"
T = Path(__file__).parent / "transcripts"


def _bench():
    spec = importlib.util.spec_from_file_location("diagnose_corpus", ROOT / "bench" / "diagnose_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()
FILES = sorted(CORPUS.glob("*.log"))


def test_the_corpus_scores_at_least_95_percent_and_calls_no_benign_log_a_failure():
    res = BENCH.score()
    assert res["total"] >= 60
    assert res["accuracy"] >= 0.95, res["misses"]
    assert res["benign_fatal"] == []


def test_the_corpus_covers_every_outcome_and_both_engines():
    metas = [BENCH.load(p)[0] for p in FILES]
    kinds = {m["kind"] for m in metas}
    assert kinds >= {
        "stopped",
        "ray_resources",
        "watchdog_timeout",
        "model_not_found",
        "warmup_timeout",
        "out_of_memory",
        "host_oom",
        "nccl_error",
        "rendezvous_hang",
        "stalled",
        "none",
    }
    assert {m["engine"] for m in metas} >= {"vllm", "sglang"}
    assert sum(m["kind"] == "none" for m in metas) >= 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_corpus_file_says_where_it_comes_from_and_what_it_must_get(path):
    meta, log = BENCH.load(path)
    # a public source URL, or text a real engine printed in the lab (named with its version)
    assert meta["source"].startswith("https://") or re.fullmatch(
        r"captured from \S+ \d+\.\d+\S* in the sparktui lab", meta["source"]
    ), meta["source"]
    for key in ("engine", "version", "setup", "happened", "kind"):
        assert meta.get(key), key
    if meta["kind"] == "stopped":
        assert meta["phase"] in PHASES
    assert log.strip()


def _line_by_line(engine: str, log: bytes) -> dict:
    d = Diagnoser(engine)
    lines = log.split(b"\n")
    prefixed = logfile.node_prefixed(log)  # saved by `sparktui logs`: "NODE │ line"
    for line in lines[:-1] if lines[-1] == b"" else lines:
        node, line = logfile.split_node(line) if prefixed else (None, line)
        d.feed(line.decode("utf-8", "replace"), node=node)
    d.finish()
    return d.to_json()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_streaming_gives_what_reading_line_by_line_gives(path, monkeypatch):
    meta, log = BENCH.load(path)
    engine = meta["engine"] if meta["engine"] in ("vllm", "sglang") else "vllm"
    monkeypatch.setattr(logfile, "CHUNK", 97)  # lines cut across chunks
    got = logfile.diagnose_stream(io.BytesIO(log), Diagnoser(engine)).to_json()
    assert json.dumps(got, sort_keys=True) == json.dumps(_line_by_line(engine, log), sort_keys=True)


class Counting(Diagnoser):
    skipped = 0

    def skip(self, count, last_line, node=None):
        self.skipped += count
        super().skip(count, last_line, node)


def test_serving_chunks_are_counted_not_parsed_and_change_nothing(monkeypatch):
    serving = (
        b'INFO:     10.0.0.2:5123 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        b"INFO 03-02 11:20:15 [loggers.py:123] Engine 000: Avg prompt throughput: 812.3 tokens/s, Running: 1 reqs\n"
    )
    log = (
        (T / "vllm_ray_ready.log").read_bytes()
        + serving * 3000
        + b"(RayWorkerWrapper pid=291, ip=10.0.0.2) ERROR 03-02 12:00:00 [worker.py:1] torch.OutOfMemoryError: "
        b"CUDA out of memory. Tried to allocate 2.00 GiB\n" + serving * 10
    )
    monkeypatch.setattr(logfile, "CHUNK", 4096)
    d = logfile.diagnose_stream(io.BytesIO(log), Counting("vllm"))
    assert d.skipped > 5000  # the serving stretch took the fast path
    assert json.dumps(d.to_json(), sort_keys=True) == json.dumps(_line_by_line("vllm", log), sort_keys=True)
    (p,) = d.problems
    assert p.kind == "out_of_memory" and p.line == log[: log.index(b"torch.OutOfMemoryError")].count(b"\n") + 1


def test_the_user_guide_quotes_the_score_the_corpus_gets():
    import re

    guide = (ROOT / "docs" / "guide.md").read_text()
    row = next(line for line in guide.splitlines() if line.startswith("| `sparktui diagnose"))
    m = re.search(r"right on (\d+) of (\d+) real logs", row)
    res = BENCH.score()
    assert m and (int(m[1]), int(m[2])) == (res["right"], res["total"])


@pytest.mark.parametrize(
    "name,kind", [("ray_worker_wrong_node_ip.log", "ray_node_ip"), ("ray_worker_unreachable_gcs.log", "ray_connect")]
)
def test_real_ray_start_failures_captured_in_the_lab_are_named(name, kind):
    meta, log = BENCH.load(CORPUS / name)
    probs = BENCH.diagnose(meta, log).ordered_problems()
    assert probs and probs[0].kind == kind == meta["kind"], [p.kind for p in probs]
    assert probs[0].hint


def test_constructed_cases_are_marked_scored_apart_and_right():
    metas = [BENCH.load(p)[0] for p in FILES]
    made = [m for m in metas if m.get("constructed")]
    assert made and all(m["constructed"].startswith("yes, not captured") for m in made)
    res = BENCH.score()
    assert res["constructed"] == {"right": len(made), "total": len(made)}
    assert res["total"] == len(metas) - len(made)


def test_the_semaphore_trap_reads_as_the_trap_not_a_wedge_or_a_stall():
    meta, log = BENCH.load(CORPUS / "vllm_semaphore_trap_constructed.log")
    d = BENCH.diagnose(meta, log)
    kinds = [p.kind for p in d.ordered_problems()]
    assert kinds[0] == "semaphore_trap" and not {"stalled", "wedged", "semaphore_lost", "traceback"} & set(kinds)
    assert "enable-linger" in d.ordered_problems()[0].hint and d.state == "failed"
