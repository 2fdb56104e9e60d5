"""The fan-out: finished nodes become senders, per-sender limits, pairs without trust."""

from __future__ import annotations

from sparktui.core.transfers.schedule import FanOut


def run_rounds(fan: FanOut) -> list[list[tuple[str, str]]]:
    """Every started pair finishes before the next round (equal link speeds)."""
    rounds = []
    while not fan.complete:
        pairs = fan.next()
        assert pairs, "nothing started although the fan-out is not complete"
        rounds.append(pairs)
        for _, d in pairs:
            fan.finished(d, True)
    return rounds


def test_two_destinations_go_in_parallel_from_the_source():
    fan = FanOut("n1", ["n2", "n3"], per_source=2)
    assert fan.next() == [("n1", "n2"), ("n1", "n3")]


def test_one_stream_per_sender_uses_the_finished_node_for_the_next():
    fan = FanOut("n1", ["n2", "n3"], per_source=1)
    assert fan.next() == [("n1", "n2")]
    assert fan.next() == []  # n1 busy, n3 waits
    fan.finished("n2", True)
    assert fan.next() == [("n2", "n3")]  # the fresh copy serves, the original has served once


def test_seven_destinations_take_log2_rounds():
    dests = [f"n{i}" for i in range(2, 9)]
    rounds = run_rounds(FanOut("n1", dests, per_source=1))
    assert [len(r) for r in rounds] == [1, 2, 4]
    received = [d for r in rounds for _, d in r]
    assert sorted(received) == sorted(dests)
    senders_in_last_round = {s for s, _ in rounds[-1]}
    assert len(senders_in_last_round) == 4  # everyone holding a copy sends


def test_failed_destination_never_sends():
    fan = FanOut("n1", ["n2", "n3", "n4"], per_source=1)
    assert fan.next() == [("n1", "n2")]
    fan.finished("n2", False)
    pairs = fan.next()
    assert pairs == [("n1", "n3")]
    assert "n2" not in fan.senders and fan.failed == ["n2"]


def test_blocked_pair_goes_to_another_sender_or_strands():
    fan = FanOut("n1", ["n2", "n3"], per_source=1)
    fan.next()
    fan.finished("n2", True)
    assert fan.next() == [("n2", "n3")]
    fan.block("n2", "n3")  # n2 has no trust towards n3
    assert fan.next() == [("n1", "n3")]
    fan.block("n1", "n3")
    assert fan.next() == [] and fan.stranded() == ["n3"] and fan.complete


def test_source_in_destinations_and_duplicates_are_ignored():
    fan = FanOut("n1", ["n1", "n2", "n2"], per_source=4)
    assert fan.next() == [("n1", "n2")]


def test_adopted_copy_joins_as_sender():
    fan = FanOut("n1", ["n3", "n4"], per_source=1)
    assert fan.next() == [("n1", "n3")]
    fan.add_sender("n2")  # a transfer an earlier run started finished meanwhile
    assert fan.next() == [("n2", "n4")]


def shared_link_makespan(nodes: int, per_source: int) -> float:
    """Copy time (in single copies) of a fan-out when each node's streams share its one link.

    A fluid model: a running copy moves at 1 / (streams its sender runs now); a copy of size 1 ends
    when it has moved 1. The schedule decides who sends to whom as copies end."""
    fan = FanOut("n1", [f"n{i}" for i in range(2, nodes + 1)], per_source=per_source)
    left: dict[str, float] = {}
    now = 0.0
    while not fan.complete:
        for _, dest in fan.next():
            left[dest] = 1.0
        share = {d: 1.0 / sum(1 for x in fan.running.values() if x == fan.running[d]) for d in left}
        step = min(left[d] / share[d] for d in left)
        now += step
        for d in list(left):
            left[d] -= step * share[d]
            if left[d] <= 1e-9:
                del left[d]
                fan.finished(d, True)
    return now


def test_on_shared_links_one_stream_per_sender_ends_in_log2_rounds():
    import math

    for n in (2, 3, 4, 5, 8, 16, 32):
        assert shared_link_makespan(n, 1) == math.ceil(math.log2(n))
        assert shared_link_makespan(n, 1) <= shared_link_makespan(n, 2)
    assert shared_link_makespan(4, 2) == 3.0 and shared_link_makespan(8, 2) == 4.0  # what two streams cost
    assert FanOut("n1", ["n2"]).per_source == 1
