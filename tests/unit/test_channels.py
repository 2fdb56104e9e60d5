"""Channel bookkeeping per node: the cap, the bounded wait for a slot, and what a shortfall says."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.core.remote.channels import Slots, busy_note, shortfall


async def test_a_slot_is_waited_for_only_as_long_as_asked():
    slots = Slots(1)
    await slots.acquire()
    with pytest.raises(asyncio.TimeoutError):
        await slots.acquire(0.05)
    assert slots.used == 1  # the wait that gave up took nothing
    waiter = asyncio.ensure_future(slots.acquire(5))
    await slots.release()
    await asyncio.wait_for(waiter, 5)
    assert slots.used == 1


def test_a_refused_open_lowers_the_cap_to_what_the_node_accepted():
    slots = Slots(8)
    slots.used = 3  # the third open was refused: the node took two
    slots.refused()
    assert slots.limit == 2 and slots.refusals == 1
    slots.lower_to(0)
    assert slots.limit == 1  # never below one: commands still run, one at a time


def test_shortfall_names_the_cause_and_its_fix():
    node_limit = Slots(8)
    node_limit.lower_to(1)
    said = shortfall("spark2", 1, 2, node_limit, 8, True, None)
    assert said.startswith("spark2's sshd accepts only 1 session(s) per connection (MaxSessions 1)")
    assert "MaxSessions 10" in said and "/etc/ssh/sshd_config on spark2" in said
    assert "MaxSessions" in busy_note("spark2", node_limit) and "in use" in busy_note("spark2", node_limit)

    ours = Slots(1)
    assert shortfall("spark1", 2, 2, ours, 1, True, None) == "ssh.max_channels is 1; set it to at least 2"
    assert busy_note("spark1", ours) == "all 1 channels (ssh.max_channels) to spark1 are in use"
    assert (
        shortfall("spark3", 0, 2, Slots(8), 8, False, "connection refused")
        == "spark3 is unreachable (connection refused)"
    )
    assert shortfall("spark1", 2, 2, Slots(8), 8, True, None) is None
