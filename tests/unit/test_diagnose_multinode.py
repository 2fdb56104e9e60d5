"""Multi-node failures read from real line shapes, offline (`sparktui diagnose`) and live (the deployment's follower).

The live reading is Diagnoser.feed_batch with the node's name and each line's docker time, ticked afterwards, as
the orchestrator feeds it (core/deploy/orchestrator.py _on_lines); both must give the same verdict.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sparktui.core.diagnosis import dockerts
from sparktui.core.diagnosis.diagnose import Diagnoser, Problem
from sparktui.core.engines import get_engine

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"


def _bench():
    spec = importlib.util.spec_from_file_location("diagnose_corpus", ROOT / "bench" / "diagnose_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()


def offline(name: str) -> tuple[dict, Diagnoser]:
    meta, log = BENCH.load(CORPUS / name)
    return meta, BENCH.diagnose(meta, log)


def live(engine: str, lines: list[str], node: str = "spark1", env_set=()) -> Diagnoser:
    """Fed as the deployment follows a node's `docker logs -t`: batches of text with their times, then ticks."""
    d = Diagnoser(engine, clock=lambda: 2e9, env_set=env_set)
    rows = [dockerts.split(line) for line in lines]
    texts = [text for _, _, text in rows]
    times = [None if key is None else key / 1e9 for _, key, _ in rows]
    for i in range(0, len(texts), 50):
        d.feed_batch(texts[i : i + 50], node, times[i : i + 50])
    d.tick(now=2e9)
    return d


def corpus_lines(name: str) -> list[str]:
    return BENCH.load(CORPUS / name)[1].decode().splitlines()


def verdict(d: Diagnoser) -> tuple:
    p = d.ordered_problems()[0]
    return p.kind, p.message, p.phase, p.cause


# ---- 1. a ready head waiting for a stalled worker while its HTTP side answers -------------------------------

POLLED = "vllm_cpu_tp2_frozen_rank_polled_v1_models_constructed.log"


def test_a_head_repeating_the_worker_wait_with_only_polls_answered_between_is_wedged_live_and_offline():
    lines = corpus_lines(POLLED)
    waits = [i for i, line in enumerate(lines) if "No available shared memory broadcast block found" in line]
    between = lines[waits[0] + 1 : waits[1]]
    assert any('"GET /v1/models HTTP/1.1" 200' in line for line in between)
    assert not any("Avg prompt throughput" in line for line in between)  # no tokens between the waits
    meta, d = offline(POLLED)
    assert d.state == "wedged" and verdict(d)[0] == meta["kind"] == "wedged"
    assert verdict(d)[1].startswith("wedged behind a stalled worker: the engine has waited 120 s")
    node = live("vllm", lines)
    assert node.state == "wedged" and verdict(node)[:3] == verdict(d)[:3]


@pytest.mark.parametrize(
    "name",
    ["benign_vllm_shm_broadcast_while_serving.log", "vllm_mnnvl_shm_broadcast_multinode.log"],
)
def test_one_wait_while_serving_and_waits_before_ready_are_no_wedge(name):
    meta, d = offline(name)
    assert "wedged" not in [p.kind for p in d.problems]
    assert d.state != "wedged" and live("vllm", corpus_lines(name)).state == d.state


# ---- 2. a worker's error in execute_model kills the engine while serving -------------------------------------

DIED = "vllm_worker_proc_died_after_execute_model_error_constructed.log"
CAUSE = "RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0"


def test_a_worker_dying_on_its_execute_model_error_is_the_engine_dying_while_serving_of_that_error():
    lines = corpus_lines(DIED)
    assert any("Worker proc VllmWorker-1 died unexpectedly" in line for line in lines)
    assert any("EngineDeadError" in line for line in lines) and "force killing" in "".join(lines[-8:])
    meta, d = offline(DIED)
    kind, message, phase, cause = verdict(d)
    assert (kind, phase) == (meta["kind"], meta["phase"]) == ("engine_died", "first_request")
    assert message == f"the engine process died while serving: {CAUSE}" and cause == CAUSE  # the worker's line
    assert [p.kind for p in d.problems] == ["engine_died"]  # one death: the later EngineDeadError is its echo
    assert "own error" in d.problems[0].hint and d.to_json()["problems"][0]["cause"] == CAUSE
    node = live("vllm", lines)
    assert node.state == "failed" and verdict(node) == verdict(d)


# ---- 3. Gloo cannot connect the ranks at distributed init -----------------------------------------------------

GLOO = {
    "vllm": "vllm_ray_worker_gloo_connectfullmesh.log",
    "sglang": "sglang_gloo_connectfullmesh_scheduler_exception.log",
}


@pytest.mark.parametrize("engine", sorted(GLOO))
def test_gloo_connect_full_mesh_is_a_rendezvous_address_problem_with_the_engines_own_fix(engine):
    meta, d = offline(GLOO[engine])
    (p,) = [p for p in d.ordered_problems() if p.kind == "nccl_error"]
    assert d.ordered_problems()[0] is p and d.state == "failed"
    assert p.message.startswith("Gloo could not connect the ranks (") and "address or interface" in p.message
    eng = get_engine(engine)
    assert p.hint == eng.hang_hint() and eng.host_ip_env in p.hint and "GLOO_SOCKET_IFNAME" in p.hint
    assert verdict(live(engine, corpus_lines(GLOO[engine]))) == verdict(d)


@pytest.mark.parametrize("engine", sorted(GLOO))
def test_with_every_interface_variable_set_the_gloo_hint_names_the_next_cause(engine):
    eng = get_engine(engine)
    d = live(engine, corpus_lines(GLOO[engine]), env_set=eng.hang_env)
    p = d.ordered_problems()[0]
    assert p.kind == "nccl_error" and p.hint == eng.hang_advice_env_set and "firewall" in p.hint


# ---- 4. Ray workers: an NCCL error in a prefixed traceback, and no GPU on the driver node ---------------------

NCCL2 = "vllm_ray_worker_nccl_error_2_unhandled_system_error.log"


def test_a_ray_prefixed_worker_traceback_ending_in_nccl_error_2_is_an_nccl_error():
    meta, d = offline(NCCL2)
    p = d.ordered_problems()[0]
    assert p.kind == meta["kind"] == "nccl_error" and d.state == "failed"
    assert p.message == "RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)"
    assert "NCCL_DEBUG=INFO" in p.hint
    assert verdict(live("vllm", corpus_lines(NCCL2), node="10.1.0.7")) == verdict(d)


def test_ray_deduplicated_nccl_error_then_the_engine_dying_still_names_nccl():
    d = Diagnoser("vllm")
    lines = corpus_lines(NCCL2)
    lines[-1] += " [repeated 3x across cluster]"  # Ray folds identical worker lines
    for line in lines + [
        "ERROR 06-25 15:28:31 async_llm_engine.py:61] Engine background task failed",
        "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly.",
    ]:
        d.feed(line)
    d.finish()
    kinds = [p.kind for p in d.ordered_problems()]
    assert kinds[0] == "nccl_error" and "stopped" not in kinds, kinds


def test_no_gpu_on_the_node_running_vllm_after_the_placement_group_is_a_ray_resources_problem():
    meta, d = offline("vllm_ray_current_node_no_gpu_constructed.log")
    kinds = [p.kind for p in d.ordered_problems()]
    assert kinds[0] == meta["kind"] == "ray_resources" and "engine_died" in kinds[1:]
    lines = corpus_lines("vllm_ray_current_node_no_gpu_constructed.log")
    assert verdict(live("vllm", lines)) == verdict(d)


def test_every_problem_of_these_logs_carries_a_hint():
    for name in [POLLED, DIED, NCCL2, *GLOO.values()]:
        _, d = offline(name)
        assert all(isinstance(p, Problem) and p.hint for p in d.problems), name
