"""The head's per-step exchange with the other nodes (sparktui/sim/collective.py), over real loopback sockets."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.sim import collective, httpapi, wire
from sparktui.sim.collective import PeerLost, StepSync


class Peer:
    """A remote node's end: answers steps unless frozen (then the bytes wait in its socket, as when paused)."""

    def __init__(self) -> None:
        self.thawed = asyncio.Event()
        self.thawed.set()
        self.steps = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def serve(self, reader, writer) -> None:
        self.writers.append(writer)
        while (msg := await wire.recv(reader)) is not None:
            await self.thawed.wait()
            self.steps += 1
            await wire.send(writer, {"op": "step_ok", "seq": msg["seq"]})

    def drop(self) -> None:
        for w in self.writers:
            w.close()


async def linked(*peers: Peer, scenario: bool = False) -> tuple[StepSync, list]:
    sync = StepSync(scenario_hang=scenario)
    servers = []
    for p in peers:
        server = await asyncio.start_server(p.serve, "127.0.0.1", 0)
        servers.append(server)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        sync.add(reader, writer)
    return sync, servers


async def until(cond) -> None:
    while not cond():
        await asyncio.sleep(0)  # yields to the loop until the condition holds; bounded by the caller's wait_for


async def test_a_step_waits_for_every_peer_and_a_frozen_one_holds_it_until_it_thaws():
    a, b = Peer(), Peer()
    sync, servers = await linked(a, b)
    await asyncio.wait_for(sync.step(), 5)
    assert (a.steps, b.steps) == (1, 1)
    b.thawed.clear()
    step = asyncio.ensure_future(sync.step())
    await asyncio.wait_for(sync.stalled(0.0), 5)  # the exchange is in flight and not answered
    assert not step.done() and sync.stalled_for() >= 0.0
    b.thawed.set()
    await asyncio.wait_for(step, 5)
    assert sync.stalled_for() == 0.0
    sync.close()
    for s in servers:
        s.close()


async def test_requests_of_one_step_share_its_exchange():
    a = Peer()
    sync, servers = await linked(a)
    a.thawed.clear()
    first = asyncio.ensure_future(sync.step())
    await asyncio.wait_for(sync.stalled(0.0), 5)
    others = [asyncio.ensure_future(sync.step()) for _ in range(5)]
    a.thawed.set()
    await asyncio.wait_for(asyncio.gather(first, *others), 5)
    assert a.steps == 1 and sync.seq == 1  # one round trip carried all six
    sync.close()
    servers[0].close()


async def test_a_closed_link_fails_the_step_and_sets_lost():
    a = Peer()
    sync, servers = await linked(a)
    a.thawed.clear()
    step = asyncio.ensure_future(sync.step())
    await asyncio.wait_for(sync.stalled(0.0), 5)
    a.drop()
    with pytest.raises(PeerLost):
        await asyncio.wait_for(step, 5)
    assert sync.lost.is_set()
    with pytest.raises(PeerLost):
        await sync.step()
    sync.close()
    servers[0].close()


async def test_abort_ends_the_waiting_steps_and_a_request_then_fails_as_the_engine_s():
    a = Peer()
    sync, servers = await linked(a)
    state = httpapi.EngineState("vllm", "m", "m", 4096, "0.33.0")
    state.status, state.steps = "ready", sync
    a.thawed.clear()
    req = asyncio.ensure_future(httpapi.generate(state, 4, "hello there", 8))
    await asyncio.wait_for(sync.stalled(0.0), 5)
    late = asyncio.ensure_future(httpapi.generate(state, 4, "hello", 8))
    await asyncio.wait_for(until(lambda: state.waiting == 1), 5)  # it arrived during the stall
    assert (state.running, state.waiting, state.generation_tokens) == (1, 1, 0)  # held: one runs, one waits
    sync.abort()
    for r in (req, late):
        with pytest.raises(httpapi.EngineDead):
            await asyncio.wait_for(r, 5)
    assert (state.running, state.waiting) == (0, 0)
    sync.close()
    servers[0].close()


async def test_the_scenario_hangs_the_collective_after_a_stretch_of_serving(monkeypatch):
    monkeypatch.setattr(collective, "SCENARIO_HANG_AFTER_S", 1e-9)
    a = Peer()
    sync, servers = await linked(a, scenario=True)
    await asyncio.wait_for(sync.step(), 5)  # the first step: no time served yet
    assert a.steps == 1
    step = asyncio.ensure_future(sync.step())
    assert await asyncio.wait_for(sync.stalled(1e9, hang_limit_s=0.0), 5) == "hang"
    before = a.steps
    sync.abort()
    with pytest.raises(PeerLost):
        await asyncio.wait_for(step, 5)
    assert a.steps == before  # nothing went out for the hung step
    sync.close()
    servers[0].close()


async def test_vllm_gauges_keep_what_the_last_finished_step_published_while_a_step_is_stalled(monkeypatch):
    monkeypatch.setattr(httpapi, "STALLED_AFTER_S", 0.0)  # any exchange in flight counts as stalled here
    a = Peer()
    sync, servers = await linked(a)
    state = httpapi.EngineState("vllm", "m", "m", 4096, "0.32.0")
    state.status, state.steps, state.stats_per_step = "ready", sync, True
    await asyncio.wait_for(httpapi.generate(state, 4, "hi there", 2), 5)
    before = state.generation_tokens
    a.thawed.clear()  # SIGSTOP
    req = asyncio.ensure_future(httpapi.generate(state, 4, "hello there", 8))
    await asyncio.wait_for(sync.stalled(0.0), 5)
    late = asyncio.ensure_future(httpapi.generate(state, 4, "hello", 8))
    await asyncio.wait_for(until(lambda: state.waiting == 1), 5)
    assert (state.running, state.waiting) == (1, 1)  # inside the engine: one holds the step, one waits
    g = state.gauges()
    assert (g["running"], g["waiting"]) == (0.0, 0.0)  # /metrics: what the real vLLM showed, the idle engine's
    state.stats_per_step = False
    assert state.gauges()["running"] == 1.0  # an engine that reads its gauges live (SGLang) shows them
    state.stats_per_step = True
    a.thawed.set()  # SIGCONT
    await asyncio.wait_for(asyncio.gather(req, late), 5)
    assert state.gauges()["running"] == 0.0 and state.generation_tokens > before
    sync.close()
    servers[0].close()
