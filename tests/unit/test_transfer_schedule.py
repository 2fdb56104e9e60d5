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
