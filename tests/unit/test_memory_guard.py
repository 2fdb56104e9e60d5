"""The guard's verdict on each reading: floor, share, warning band, pressure, guard off, unwatched, fall rate."""

from __future__ import annotations

from sparktui.core.config.config import MemoryConfig
from sparktui.core.memory.guard import ALLOC_ENV, Guard, advice
from sparktui.core.memory.sample import MemSample

GiB = 2**30
TOTAL = 128 * GiB


def reading(avail_gib: float, at: float = 0.0, node: str = "spark2", psi: float | None = 0.0, **kw) -> MemSample:
    return MemSample(
        node, at, total=kw.pop("total", TOTAL), available=int(avail_gib * GiB), psi_some=psi, psi_full=psi, **kw
    )


def test_above_the_band_is_ok_inside_it_a_warning_under_the_floor_a_stop():
    g = Guard(MemoryConfig(floor="4GiB", warn="8GiB"))
    assert g.judge(reading(12.5, 0)).level == "ok"
    warn = g.judge(reading(11.5, 1))
    assert (warn.level, warn.kind) == ("warn", "memory_low")
    assert "11.5 GiB available, 7.5 GiB above the 4.0 GiB floor" in warn.detail
    stop = g.judge(reading(3.9, 2))
    assert (stop.level, stop.kind) == ("stop", "memory_floor")
    assert stop.detail.startswith("3.9 GiB available, under the 4.0 GiB floor")


def test_a_share_floor_follows_each_nodes_total():
    g = Guard(MemoryConfig(floor="5%", warn="1%"))
    assert g.judge(reading(6.0, total=128 * GiB)).level == "stop"  # 5% of 128 GiB is 6.4 GiB
    assert g.judge(reading(6.0, node="small", total=64 * GiB)).level == "ok"  # 3.2 + 0.64 GiB


def test_the_fall_rate_is_measured_over_the_history_and_named_in_the_stop():
    g = Guard(MemoryConfig(floor="4GiB", warn="8GiB"), history_s=15)
    for t, a in ((0, 60), (5, 40), (10, 21.1)):
        g.judge(reading(a, t))
    v = g.judge(reading(3.1, 20))  # 60 -> 3.1 GiB over 20 s, then the oldest drops: 40 -> 3.1 over 15 s
    assert v.level == "stop"
    assert v.falling is not None and abs(v.falling - (40 - 3.1) * GiB / 15) < GiB / 100
    assert v.detail == "3.1 GiB available, under the 4.0 GiB floor, falling 2.5 GiB/s"


def test_a_steady_node_names_no_fall_and_one_reading_has_no_rate():
    g = Guard(MemoryConfig())
    first = g.judge(reading(3.0, 0))
    assert first.falling is None and "falling" not in first.detail
    assert "falling" not in g.judge(reading(3.0, 2)).detail


def test_pressure_past_the_limit_stops_and_past_half_of_it_warns():
    g = Guard(MemoryConfig(pressure=60))
    v = g.judge(reading(50, psi=61.5))
    assert (v.level, v.kind) == ("stop", "memory_pressure") and "61.5% (full avg10), over the 60% limit" in v.detail
    w = g.judge(reading(50, psi=31))
    assert (w.level, w.kind) == ("warn", "memory_low") and "half way to the 60% limit" in w.detail
    assert g.judge(reading(50, psi=29)).level == "ok"


def test_with_the_guard_off_it_only_warns_and_says_so():
    v = Guard(MemoryConfig(guard=False)).judge(reading(1.0))
    assert v.level == "warn" and v.kind == "memory_floor"
    assert "under the 4.0 GiB floor" in v.detail and "memory.guard is off: nothing is stopped" in v.detail


def test_a_failed_reading_is_unwatched_and_said_once_per_node_until_it_reads_again():
    g = Guard(MemoryConfig())
    bad = MemSample("spark2", 0, error="spark2 gave no reading within 10 s")
    first, again = g.judge(bad), g.judge(bad)
    assert (first.level, again.level) == ("unwatched", "unwatched")
    assert "spark2 gave no reading within 10 s" in first.detail and again.detail == ""
    assert g.judge(MemSample("spark1", 0, error="x")).detail  # another node is news
    g.judge(reading(50))
    assert g.judge(bad).detail  # after a good reading, a new failure is said again


def test_a_node_without_pressure_is_watched_for_memory_and_says_pressure_is_not_once():
    g = Guard(MemoryConfig())
    v = g.judge(reading(50, psi=None))
    assert v.level == "ok" and v.detail == "no /proc/pressure on spark2: pressure not watched"
    assert g.judge(reading(50, 1, psi=None)).detail == ""
    assert g.judge(reading(2, 2, psi=None)).level == "stop"


def test_the_advice_gives_numbers_for_the_engines_own_flags():
    cfg = MemoryConfig(floor="4GiB", warn="8GiB")
    text = advice(
        reading(3.0),
        cfg,
        fraction=0.8,
        fraction_flag="--gpu-memory-utilization",
        kv_flag="--kv-cache-memory-bytes",
        len_flag="--max-model-len",
        max_len=32768,
    )
    assert ALLOC_ENV in text
    # 1 GiB under the floor plus the 8 GiB band, of 128 GiB: 0.8 - 0.07 -> 0.70 in steps of 0.05
    assert "lower --gpu-memory-utilization from 0.8 to 0.7" in text
    assert "--kv-cache-memory-bytes, 9.0 GiB under what it took" in text
    assert "a shorter --max-model-len 16384" in text
    bare = advice(reading(3.0), cfg, fraction=0.8, fraction_flag=None, len_flag="--context-length")
    assert "utilization" not in bare and "kv" not in bare.lower() and "--context-length" in bare


def test_the_advice_does_not_ask_for_the_allocator_setting_a_launch_already_had():
    cfg = MemoryConfig(floor="4GiB", warn="2GiB")
    text = advice(
        reading(3.0),
        cfg,
        fraction=0.75,
        fraction_flag="--mem-fraction-static",
        len_flag="--context-length",
        expandable=True,
    )
    assert ALLOC_ENV not in text and text.startswith("lower --mem-fraction-static from 0.75 to 0.7")
    only_len = advice(reading(3.0), cfg, len_flag="--context-length", max_len=8192, expandable=True)
    assert only_len == "a shorter --context-length 4096"


def test_falls_in_large_steps_clear_of_the_floor_are_no_reason_to_stop():
    # a vLLM head with both ranks' memory (the demo story over Ray): weights, the KV pool whole, graphs
    g = Guard(MemoryConfig(floor="4GiB", warn="2GiB", interval=2.0))
    for t, a in ((0, 116.0), (2, 80.0), (4, 36.0), (6, 24.8), (8, 24.8)):
        assert g.judge(reading(a, t)).level == "ok", (t, a)
