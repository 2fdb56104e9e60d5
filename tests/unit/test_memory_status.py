"""A node's memory as `status` shows it: the JSON shape and its one short line."""

from __future__ import annotations

from sparktui.core.memory.sample import MemSample
from sparktui.core.memory.status import memory_json, memory_words

GiB = 2**30


def test_the_json_carries_the_numbers_the_level_and_why():
    s = MemSample("spark2", 0, total=128 * GiB, available=9 * GiB, swap_total=8 * GiB, swap_free=6 * GiB, psi_full=0.5)
    m = memory_json(s, "warn", "spark2: 9.0 GiB available, 5.0 GiB above the 4.0 GiB floor")
    assert m == {
        "available": 9 * GiB,
        "total": 128 * GiB,
        "swap_used": 2 * GiB,
        "psi_full": 0.5,
        "level": "warn",
        "detail": "spark2: 9.0 GiB available, 5.0 GiB above the 4.0 GiB floor",
    }
    assert memory_words("spark2", m) == (
        "spark2 memory: 9.0 of 128.0 GiB available, pressure 0.5% "
        "(warn: spark2: 9.0 GiB available, 5.0 GiB above the 4.0 GiB floor)"
    )


def test_a_reading_that_failed_says_so_with_its_error():
    m = memory_json(MemSample("spark1", 0, error="spark1 gave no reading within 10 s"), "unwatched", "")
    assert m["available"] is None and m["detail"] == "spark1 gave no reading within 10 s"
    assert memory_words("spark1", m) == "spark1 memory: not read (spark1 gave no reading within 10 s)"
    ok = memory_json(MemSample("spark1", 0, total=128 * GiB, available=100 * GiB), "ok", "")
    assert memory_words("spark1", ok) == "spark1 memory: 100.0 of 128.0 GiB available"
