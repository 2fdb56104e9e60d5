"""Plain words for milestones and operations: no internal ids reach the user."""

from __future__ import annotations

import re

import pytest

from sparktui.core.state.words import milestone_words, operation_doing, operation_name

ID = re.compile(r"[a-z]+_[a-z_]+")  # snake_case: an internal identifier


@pytest.mark.parametrize(
    "kind,data,text",
    [
        ("weights_loading", {"percent": 25}, "loading weights 25 %"),
        ("weights_loading", {"percent": 100}, "weights loaded"),
        ("kv_cache", {"size_gib": 70.41}, "KV cache 70.4 GiB"),
        ("kv_cache", {"tokens": 123456}, "KV cache 123,456 tokens"),
        (
            "transport",
            {"transport": "socket", "iface": "enp1s0f1np1"},
            "NCCL over TCP sockets on enp1s0f1np1 (slow path)",
        ),
        ("cuda_graph", {"phase": "end", "seconds": 12.0}, "CUDA graphs captured in 12.0 s"),
        (
            "nccl_net",
            {"label": "NET/IB (rocep1s0f1)", "flags": ["spark2: roceP2p1s0f1 idle"]},
            "NCCL uses NET/IB (rocep1s0f1); spark2: roceP2p1s0f1 idle",
        ),
        ("some_new_step", {"size_gib": 1.25, "rank": 3, "tokens": 7}, "some new step 1.2 GiB, rank 3, 7 tokens"),
    ],
)
def test_milestones_read_as_words(kind, data, text):
    assert milestone_words(kind, data) == text


@pytest.mark.parametrize(
    "kind",
    [
        "container_started",
        "ray_started",
        "ray_connected",
        "dist_init_begin",
        "dist_init_end",
        "transport",
        "weights_loading",
        "slow_load",
        "kv_cache",
        "cuda_graph",
        "ready",
    ],
)
def test_no_milestone_shows_an_identifier(kind):
    for data in ({}, {"percent": 50, "size_gib": 2.0, "tokens": 10, "phase": "begin", "transport": "rdma"}):
        assert not ID.search(milestone_words(kind, data)), milestone_words(kind, data)


def test_operations_in_words():
    assert operation_doing("sync_model") == "syncing model"
    assert operation_name("prepare_pivot") == "Pivot"
    assert not ID.search(operation_doing("some_new_op")) and not ID.search(operation_name("some_new_op"))


def test_the_transport_milestone_reads_its_old_word():
    """It carried gloo too, so `nccl_transport` became `transport`; output saved before still reads."""
    from sparktui.core.diagnosis.logevents import Milestone
    from sparktui.core.state.states import MilestoneKind

    data = {"transport": "gloo", "backend": "gloo"}
    assert MilestoneKind("nccl_transport") is MilestoneKind.TRANSPORT
    assert Milestone("nccl_transport", 3, data=data).kind is MilestoneKind.TRANSPORT
    assert (
        milestone_words("nccl_transport", data)
        == milestone_words("transport", data)
        == ("collectives over gloo (a CPU build: no NCCL)")
    )
    with pytest.raises(ValueError):
        MilestoneKind("nccl_transprot")  # only the old word is read, not anything near it


def test_phases_and_problem_kinds_read_as_words():
    from sparktui.core.state.states import Phase, ProblemKind
    from sparktui.core.state.words import phase_words, problem_words

    assert phase_words(Phase.WEIGHTS) == phase_words("weights") == "weight loading"
    assert problem_words(ProblemKind.RENDEZVOUS_HANG) == "rendezvous hang"
    assert problem_words(ProblemKind.NCCL_ERROR) == "NCCL error"
    assert problem_words("peer_lost") == "peer lost"  # an engine's own kind
    for word in [*(phase_words(p) for p in Phase), *(problem_words(k) for k in ProblemKind)]:
        assert not ID.search(word), word


def test_preflight_check_kinds_read_as_words():
    from sparktui.core.preflight import NodeResult
    from sparktui.core.state.states import CheckKind
    from sparktui.core.state.words import check_words

    assert check_words(CheckKind.PORT_IN_USE) == check_words("port_in_use") == "port in use"
    assert check_words(CheckKind.IPC) == "semaphore trap"
    assert check_words(None) == check_words(CheckKind.UNKNOWN) == "failed"
    for kind in CheckKind:
        assert not ID.search(check_words(kind)), kind
    assert NodeResult("spark1", 0, kind="peer_late").kind is CheckKind.PEER_LATE  # a word reads as its member
    with pytest.raises(ValueError):
        NodeResult("spark1", 0, kind="peer_lat")  # a misspelt kind fails where it is made
