"""A check container that starts slowly on a lab node: its start is held by a `docker` wrapper on that node
until the test opens a fifo (or never), so the slowness is decided by the test, not by a clock."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sparktui.core.config.config import load_config
from sparktui.core.nodes.inventory import take_inventory
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.preflight import runner, run_preflight
from sparktui.core.remote.ssh import Cluster

from .netlab import Lab, LabNode
from .test_preflight import leftover_containers, sim  # noqa: F401 - sim is the fixture with the simulator image

pytestmark = pytest.mark.lab
TIMEOUT = 5.0
# Room for a real start of the simulator's image (vfs copies its layers for each container: seconds on a
# busy machine), while the held worker's start never comes.
WINDOW = 45.0
HELD = TIMEOUT + runner.START_SLACK + 1  # longer than all a check got when its clock ran from `docker run`

# Holds `docker run` (only the check's) until /run/lab/hold gives EOF: a writer opened and closed it.
WRAPPER = """#!/bin/sh
if [ "$1" = run ]; then cat /run/lab/hold >/dev/null; fi
exec /usr/bin/docker "$@"
"""


def _hold(node: LabNode) -> Path:
    fifo = node.path / "lab" / "hold"
    if not fifo.exists():
        os.mkfifo(fifo)
    docker = node.path / "sbin" / "docker"
    docker.unlink()
    docker.write_text(WRAPPER)
    docker.chmod(0o755)
    return fifo


def _unhold(node: LabNode) -> None:
    docker = node.path / "sbin" / "docker"
    docker.unlink()
    docker.symlink_to("/usr/bin/docker")
    (node.path / "lab" / "hold").unlink(missing_ok=True)


def _held_processes(lab: Lab, node: LabNode) -> str:
    # the bracket keeps this grep from finding its own command line (quoted: no glob)
    return lab.sh(node, "grep -l 'lab/hol[d]' /proc/[0-9]*/cmdline 2>/dev/null; true").stdout.strip()


async def _run(lab: Lab, **kw):
    config = load_config(lab.config_path)
    async with Cluster(config) as cluster:
        inv = await take_inventory(cluster, config)
        plan = make_plan(config, inv.facts, inv.subnets, PlanOptions())
        return await run_preflight(cluster, config, plan, subnets=inv.subnets, **kw)


async def test_a_container_that_never_starts_is_its_own_verdict_and_leaves_nothing(sim):
    worker = sim.nodes[1]
    _hold(worker)  # nobody ever writes: the worker's container never starts
    try:
        stages: list[tuple[str, str]] = []
        # the head's check outlasts the window: it is still waiting when the worker is given up on
        v = await _run(sim, timeout=2 * WINDOW, start_window=WINDOW, on_stage=lambda *a: stages.append(a))
    finally:
        _unhold(worker)
    assert (v.root.node, v.root.kind) == (worker.name, "not_started"), v.summary()
    assert f"the container did not start within {WINDOW:g} s on {worker.name}" in v.reason
    assert "--iface" not in v.fix and "subnet" not in v.fix and "docker info" in v.fix
    assert v.nodes[sim.head.name].kind == "stopped"  # the head is not blamed for the peer it never met
    assert (sim.head.name, "rendezvous") in stages and (worker.name, "rendezvous") not in stages
    assert leftover_containers(sim) == {}
    assert _held_processes(sim, worker) == ""  # the held `docker run` was killed with its group


async def test_a_start_held_past_the_timeout_still_meets_once_released(sim):
    fifos = [_hold(n) for n in sim.nodes]
    both = asyncio.Event()
    waiting: set[str] = set()

    def stage(node: str, what: str) -> None:
        if what == "starting":
            waiting.add(node)
            if len(waiting) == len(sim.nodes):
                both.set()

    def release(fifo: Path) -> None:
        with open(fifo, "w"):  # returns once the held start reads the fifo; closing lets it go on
            pass

    async def slow_start() -> None:
        await both.wait()
        await asyncio.sleep(HELD)  # the slow start itself, not a synchronisation
        await asyncio.gather(*(asyncio.to_thread(release, f) for f in fifos))

    try:
        task = asyncio.create_task(slow_start())
        v = await _run(sim, timeout=TIMEOUT, start_window=120, on_stage=stage)
        await task
    finally:
        for n in sim.nodes:
            _unhold(n)
    assert v.ok, v.summary()
    assert all(r.start_seconds is not None and r.start_seconds >= HELD for r in v.nodes.values())
    assert leftover_containers(sim) == {}
