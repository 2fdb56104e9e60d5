"""A bench run that did not measure the deployment alone is marked with why, and never compared with a clean
one: other clients' requests in the engine's own counters, failed requests, a deployment changed under it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from sparktui.core.bench import results, taint
from sparktui.core.deploy.metrics_read import Target
from sparktui.core.serving.metrics import parse

VLLM = Target("lab", "vllm", "n1", 8000)


def scrape(requests: int, engine: str = "vllm"):
    """The engine's /metrics after serving `requests` (its TTFT histogram, as the engine writes it)."""
    reg = CollectorRegistry()
    h = Histogram(
        f"{engine}:time_to_first_token_seconds", "t", ["model_name"], buckets=[0.05, 0.5], registry=reg
    ).labels("m")
    for _ in range(requests):
        h.observe(0.02)
    return parse(generate_latest(reg).decode(), engine)


def seen(requests: int, target: Target | None = VLLM, plan: str = "p1", why: str = "") -> taint.Seen:
    return taint.Seen(target, plan, scrape(requests) if target else None, why)


def test_a_run_alone_on_the_engine_is_clean():
    # 8 + 16 requests sent in two client runs, each with its one test prompt
    assert taint.reasons(seen(100), seen(100 + 24 + 2), sent=24, runs=2, completed=24, failed=0) == ""


def test_other_clients_requests_seen_in_the_engines_counters_taint_the_run():
    why = taint.reasons(seen(100), seen(100 + 24 + 2 + 7), sent=24, runs=2, completed=24, failed=0)
    assert why == "other traffic: the engine served 9 requests besides the bench's"


def test_failed_requests_and_a_pivot_under_the_run_are_both_named():
    sglang = Target("lab", "sglang", "n1", 30000)
    why = taint.reasons(seen(100), taint.Seen(sglang, "p2", scrape(3, "sglang")), sent=8, runs=1, completed=2, failed=6)
    assert why.startswith("failed requests: 6 of 8; deployment changed during the run (vllm on n1:8000 → sglang")


def test_an_engine_gone_or_restarted_after_the_run_is_a_changed_deployment():
    gone = taint.reasons(
        seen(100), seen(0, target=None, why="no container of lab"), sent=8, runs=1, completed=8, failed=0
    )
    assert gone == "deployment changed during the run (no container of lab)"
    restarted = taint.reasons(seen(100), seen(5), sent=8, runs=1, completed=8, failed=0)
    assert "the engine restarted" in restarted
    replanned = taint.reasons(seen(100), seen(108, plan="p2"), sent=8, runs=1, completed=8, failed=0)
    assert "plan p1 → p2" in replanned


def row(engine: str, started: float, tainted: str = "") -> results.Row:
    return results.Row("lab", engine, "img", "p1", 8, 10.0, 20.0, 2.0, 100.0, 4.0, 8, started=started, tainted=tainted)


def test_a_tainted_run_is_kept_but_set_beside_no_clean_run(tmp_path):
    path = tmp_path / "bench.jsonl"
    results.append([row("sglang", 1.0)], path)
    results.append([row("sglang", 2.0, tainted="failed requests: 6 of 8")], path)  # benched during the pivot
    results.append([row("vllm", 3.0)], path)
    rows = results.load(path)[0]
    assert rows[1].tainted == "failed requests: 6 of 8"  # kept with its reason
    latest, before = results.beside(rows, "lab")
    assert latest[0].engine == "vllm" and before[0].started == 1.0  # the clean run, not the one in the pivot
    results.append([row("vllm", 4.0, tainted="other traffic: the engine served 3 requests besides the bench's")], path)
    latest, before = results.beside(results.load(path)[0], "lab")
    assert latest[0].tainted and before == []
