"""Diagnosis after READY: what serves, what breaks while serving, and what is only a doubt.

The logs are the corpus's real ones (tests/corpus, URL per file), fed line by line as the live
follower does and streamed as `sparktui diagnose` does.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.core.diagnosis.diagnose import Diagnoser

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"


def _bench():
    spec = importlib.util.spec_from_file_location("diagnose_corpus", ROOT / "bench" / "diagnose_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()


def live(name: str) -> Diagnoser:
    """Fed line by line with a clock, as the deployment's log follower feeds it."""
    meta, log = BENCH.load(CORPUS / name)
    d = Diagnoser(meta["engine"], clock=lambda: 1000.0)
    for line in log.decode().splitlines():
        d.feed(line, now=1000.0)
    return d


# Each engine's two forms of its periodic stats line (real lines from the corpus threads).
SERVING_LINES = {
    "sglang dot form": (
        "sglang",
        "[2025-02-10 01:56:10 TP0] Decode batch. #running-req: 57, #token: 290889, "
        "token usage: 0.95, gen throughput (token/s): 656.96, #queue-req: 68",
    ),
    "sglang comma form": (
        "sglang",
        "[2026-03-17 17:31:50 DP12 TP12] Decode batch, #running-req: 12, #token: 768, "
        "token usage: 0.00, cuda graph: True, gen throughput (token/s): 3.28, #queue-req: 0",
    ),
    "vllm V0": (
        "vllm",
        "INFO 02-03 13:14:04 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache "
        "usage: 0.0%, CPU KV cache usage: 0.0%",
    ),
    "vllm V1": (
        "vllm",
        "(APIServer pid=1) INFO 05-12 01:47:42 [loggers.py:271] Engine 000: Avg prompt throughput: "
        "68.4 tokens/s, Avg generation throughput: 58.6 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 33.5%, Prefix cache hit rate: 96.4%",
    ),
}


@pytest.mark.parametrize("form", sorted(SERVING_LINES))
def test_both_stats_forms_of_each_engine_count_as_serving(form):
    engine, line = SERVING_LINES[form]
    d = Diagnoser(engine)
    d.feed(line)
    d.finish()
    assert d.state == "ready" and d.problems == []
    assert d.phases.node_phase(None) == "first_request"
    assert d.quiet_serving  # the streaming reader's fast path applies to it too


@pytest.mark.parametrize(
    "name,op,secs,rank",
    [
        ("vllm_v0_serving_then_allreduce_timeout.log", "ALLREDUCE", 1800, 4),
        ("sglang_serving_dot_form_then_allgather_timeout.log", "ALLGATHER_BASE", 600, 2),  # op on the wrapped line
    ],
)
def test_a_collective_timeout_while_serving_is_named_with_its_rank_live_and_offline(name, op, secs, rank):
    d = live(name)
    assert d.state == "failed"
    (p,) = [p for p in d.ordered_problems() if p.kind == "watchdog_timeout"]
    assert p.message.startswith(f"collective timeout on rank {rank}:") and p.message.endswith("while serving")
    assert (p.phase, p.rank) == ("first_request", rank)
    assert f"NCCL {op} did not finish within {secs} s" in p.message
    meta, log = BENCH.load(CORPUS / name)
    offline = BENCH.diagnose(meta, log).ordered_problems()[0]
    assert (offline.kind, offline.message, offline.rank) == (p.kind, p.message, p.rank)


def test_every_rank_reporting_the_same_timeout_makes_one_problem():
    d = Diagnoser("vllm")
    d.feed(SERVING_LINES["vllm V0"][1])
    for r in (1, 0, 2):
        d.feed(
            f"[rank{r}]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, "
            f"Timeout(ms)=600000) ran for 600020 milliseconds before timing out."
        )
    (p,) = d.problems
    assert p.rank == 1 and "rank 1" in p.message


def test_an_engine_death_after_serving_says_it_was_serving():
    d = live("vllm_v1_serving_then_engine_dead.log")
    (p,) = d.problems
    assert p.kind == "engine_died" and p.phase == "first_request" and "while serving" in p.message
    assert d.state == "failed"


def test_the_same_death_before_ready_does_not_claim_serving():
    d = Diagnoser("vllm")
    d.feed(
        "(APIServer pid=1) ERROR 05-12 01:48:42 [api_router.py:72] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause."
    )
    (p,) = d.problems
    assert "serving" not in p.message and p.phase is None


def test_a_pyspy_dump_while_serving_in_the_comma_form_is_not_fatal(capsys):
    d = live("benign_sglang_comma_form_pyspy_dump_while_serving.log")
    assert d.state == "ready" and d.problems == []
    meta, log = BENCH.load(CORPUS / "benign_sglang_comma_form_pyspy_dump_while_serving.log")
    d = BENCH.diagnose(meta, log)
    assert d.state == "ready" and d.ordered_problems() == []  # not "stopped during container start"


def test_a_soft_watchdog_while_serving_leaves_the_server_ready_and_diagnose_exits_0(capsys, monkeypatch):
    # SGLang's soft watchdog only logs (python/sglang/srt/utils/watchdog.py, _watchdog_once: no signal when soft)
    log = (
        SERVING_LINES["sglang comma form"][1] + "\n"
        "[2026-03-17 17:36:53] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)\n"
    )
    d = Diagnoser("sglang")
    for line in log.splitlines():
        d.feed(line)
    (p,) = d.problems
    assert p.kind == "watchdog_timeout" and p.provisional and d.state == "ready"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(log.encode())))
    assert main(["diagnose", "--engine", "sglang", "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "ready" and out["problems"][0]["kind"] == "watchdog_timeout"


def test_a_hard_watchdog_while_serving_is_still_a_failure():
    d = Diagnoser("sglang")
    d.feed(SERVING_LINES["sglang comma form"][1])
    d.feed("[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)")
    assert d.state == "failed" and d.problems[0].phase == "first_request"
