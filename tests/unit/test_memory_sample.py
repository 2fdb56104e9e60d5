"""Parsing a node's /proc/meminfo and /proc/pressure/memory, edge cases included."""

from __future__ import annotations

from sparktui.core.memory.sample import parse_sample

MEMINFO = (
    "MemTotal:       131072000 kB\nMemFree:         1000000 kB\nMemAvailable:    7000000 kB\n"
    "Buffers:           1000 kB\nCached:          2000000 kB\nSwapTotal:       8000000 kB\n"
    "SwapFree:        6000000 kB\n"
)
PSI = "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=4.25 avg60=1.00 avg300=0.20 total=45\n"


def test_a_full_reading():
    s = parse_sample("n1", 5.0, MEMINFO, PSI)
    assert (s.total, s.available) == (131072000 * 1024, 7000000 * 1024)
    assert s.swap_used == 2000000 * 1024 and (s.psi_some, s.psi_full) == (12.5, 4.25)
    assert s.error is None and not s.estimated


def test_no_pressure_file_leaves_psi_unknown_not_zero():
    s = parse_sample("n1", 0, MEMINFO, None)
    assert s.psi_some is None and s.psi_full is None and s.available == 7000000 * 1024


def test_a_kernel_without_memavailable_estimates_it_from_free_and_cache():
    s = parse_sample("n1", 0, MEMINFO.replace("MemAvailable:    7000000 kB\n", ""), PSI)
    assert s.estimated and s.available == (1000000 + 2000000 + 1000) * 1024


def test_a_garbled_or_truncated_meminfo_is_an_error_not_zeros():
    for text in ("", "garbage\n", "MemTotal: lots kB\n", "MemAvailable:  100 kB\n"):
        s = parse_sample("n1", 0, text, PSI)
        assert s.error and s.total is None and s.available is None, text


def test_a_pressure_file_with_only_some_says_nothing_of_full():
    s = parse_sample("n1", 0, MEMINFO, PSI.splitlines()[0] + "\n")
    assert s.psi_some == 12.5 and s.psi_full is None


def test_to_json_carries_the_fields_the_status_shows():
    d = parse_sample("n1", 1.0, MEMINFO, PSI).to_json()
    assert {"node", "at", "total", "available", "psi_full", "error"} <= set(d)
