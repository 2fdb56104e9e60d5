"""The `memory:` section: the guard's floor, warning band, pressure limit and pace, with clear errors."""

from __future__ import annotations

import pytest

from sparktui.core.config.config import ConfigError, load_config_text
from sparktui.core.memory.limits import amount_bytes, parse_amount

BASE = "cluster: c\nnodes: [{name: a, host: 127.0.0.1}]\nmodel: {name: m, path: /m}\n"
GiB = 2**30


def test_the_guard_is_on_by_default_with_floor_and_band_below_what_a_loaded_spark_keeps():
    m = load_config_text(BASE).memory
    assert m.guard is True
    # after loading, a 128 GB Spark was seen at ~6.8 GiB available and alive: neither stopped nor warned there
    assert amount_bytes(m.floor, None) + amount_bytes(m.warn, None) < 6.8 * GiB


def test_sizes_and_shares_of_memtotal_are_read():
    m = load_config_text(BASE + "memory: {guard: off, floor: 5%, warn: 6g, pressure: 40, interval: 1}\n").memory
    assert (m.guard, m.pressure, m.interval) == (False, 40.0, 1.0)
    assert amount_bytes(m.floor, 128 * GiB) == int(128 * GiB * 0.05)
    assert amount_bytes(m.floor, None) is None  # a share of a total not read yet
    assert amount_bytes(m.warn, None) == 6 * GiB
    assert parse_amount("512MiB") == (512 * 2**20, None) and parse_amount("1.5 GB") == (int(1.5 * GiB), None)


@pytest.mark.parametrize(
    "bad, words",
    [
        ("memory: {floor: lots}", "memory.floor: 'lots' is not a size or a share"),
        ("memory: {floor: 4}", "memory.floor: '4' has no unit"),
        ("memory: {warn: 150%}", "150% is not a share between 0% and 100%"),
        ("memory: {guard: maybe}", "memory.guard 'maybe' is not on or off"),
        ("memory: {pressure: 200}", "memory.pressure 200 is out of range"),
        ("memory: {flor: 1g}", "did you mean 'floor'"),
    ],
)
def test_bad_values_name_the_key_and_what_is_expected(bad, words):
    with pytest.raises(ConfigError) as e:
        load_config_text(BASE + bad + "\n")
    assert words in str(e.value) and ":4:" in str(e.value)
