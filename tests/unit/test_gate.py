"""Back-pressure on a log reader: it waits while the screen holds too many of its lines, and while
braked (a key is being answered) as soon as it holds any."""

from __future__ import annotations

import asyncio

from sparktui.core.state.events import Gate


async def test_a_braked_reader_waits_for_every_held_line_and_runs_on_once_released():
    gate = Gate(limit=100)
    ack = gate.hold(10)
    assert not gate.over  # 10 held, under the limit: read on
    gate.brake(True)
    assert gate.over
    waiting = asyncio.create_task(gate.wait(timeout=5))
    await asyncio.sleep(0)
    assert not waiting.done()
    gate.brake(False)  # released with lines still held (under half the limit): the reader goes on
    assert await asyncio.wait_for(waiting, 1) is True
    ack()
    assert gate.held == 0


async def test_while_braked_the_reader_goes_on_once_the_screen_has_taken_everything():
    gate = Gate(limit=100)
    gate.brake(True)
    first, second = gate.hold(5), gate.hold(5)
    waiting = asyncio.create_task(gate.wait(timeout=5))
    await asyncio.sleep(0)
    first()
    await asyncio.sleep(0)
    assert not waiting.done()  # 5 lines still held
    second()
    assert await asyncio.wait_for(waiting, 1) is True
    assert gate.braked  # still braked: the next line held stops it again
    gate.hold(1)
    assert gate.over


async def test_releasing_the_brake_leaves_a_reader_over_the_limit_waiting():
    gate = Gate(limit=10)
    gate.brake(True)
    gate.hold(20)
    waiting = asyncio.create_task(gate.wait(timeout=5))
    await asyncio.sleep(0)
    gate.brake(False)
    for _ in range(3):  # a wake-up would take two turns of the loop (call_soon_threadsafe, then the task)
        await asyncio.sleep(0)
    assert not waiting.done() and gate.over
    waiting.cancel()
