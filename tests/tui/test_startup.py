"""Start-up: the nodes are dialled before the screen is up, and each card fills as its node answers."""

from __future__ import annotations

import asyncio
from sparktui.core.state.events import ConnectionChanged, NodeUpdated
from sparktui.core.state.journal import Journal
from sparktui.core.remote.ssh import Result
from sparktui.tui.app import SparkApp
from sparktui.tui.controller import Controller, InventoryRound

from .conftest import wait_for
from .samples import spark_config
from .sshnodes import start_nodes, stop_nodes


class SlowNode:
    """Answers the probe when its gate opens (a node far away, or busy)."""

    def __init__(self, cfg, gate: asyncio.Event | None) -> None:
        self.name, self.config, self.gate = cfg.name, cfg, gate
        self.connected, self.error = True, None

    async def run(self, cmd, timeout=None, input=None) -> Result:
        if self.gate is not None:
            await self.gate.wait()
        return Result(0, "", "", 0.0)

    async def sessions_short(self, want, timeout=30.0):
        return None


class Nodes(list):
    """The nodes as a Cluster gives them: iterated in config order, and by name."""

    @property
    def nodes(self) -> dict:
        return {n.name: n for n in self}


async def test_each_card_is_filled_as_its_node_answers_not_when_the_last_one_does():
    cfg = spark_config()
    gate = asyncio.Event()
    nodes = [SlowNode(cfg.nodes[0], None), SlowNode(cfg.nodes[1], gate)]
    posted: list = []
    first_in = asyncio.Event()

    def post(msg) -> None:
        posted.append(msg)
        if isinstance(msg.event, NodeUpdated):
            first_in.set()

    c = Controller(cfg, journal=Journal(), cluster=Nodes(nodes), poll_interval=3600, threaded=False)
    c.attach(post)
    start = asyncio.ensure_future(c._start())
    await asyncio.wait_for(first_in.wait(), 10)
    assert [m.event.facts.name for m in posted if isinstance(m.event, NodeUpdated)] == [cfg.nodes[0].name]
    assert not any(isinstance(m.event, InventoryRound) for m in posted)  # the slow node holds only its own card
    gate.set()
    await asyncio.wait_for(start, 10)
    assert [m.event.facts.name for m in posted if isinstance(m.event, NodeUpdated)] == [n.name for n in cfg.nodes]
    assert isinstance([m.event for m in posted if not isinstance(m.event, ConnectionChanged)][-1], InventoryRound)
    c._poller.cancel()


async def test_probes_begun_before_the_screen_reach_it_in_order(tmp_path):
    cfg, servers = await start_nodes(tmp_path)
    controller = Controller(cfg, journal=Journal(), poll_interval=3600)
    controller.prestart()  # as `sparktui` does before building the app
    await asyncio.wrap_future(controller._early_start)  # everything happens before the screen exists
    early = [make() for make in controller._early]  # the messages are built once the screen attaches
    assert early and isinstance(early[-1].event, InventoryRound)
    app = SparkApp(cfg, controller=controller)
    try:
        async with app.run_test(size=(100, 32)) as pilot:
            await wait_for(pilot, lambda: app.inventory_ready, timeout=30, what="the early inventory")
            assert all(app.links[n].connected for n in ("spark1", "spark2"))
            assert "NVIDIA GB10" in str(app.nodes_pane.card("spark2").content)
            # the layout every node's addresses describe together, on each card
            assert "FABRIC direct" in str(app.nodes_pane.card("spark1").content)
            journal = app.query_one("#journal")
            await wait_for(pilot, lambda: journal.row_count >= 2, what="the probes in the journal")
    finally:
        stop_nodes(servers)


def test_a_start_begun_before_textual_loads_hands_over_what_it_saw(tmp_path):
    """The core thread reports (a refused node) while the screen's thread imports Textual: each
    message is built once, on hand-over, and nothing half-imported is met on either thread."""
    import socket
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed: the dial is refused at once
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"cluster: sparks\nnodes:\n  - {{name: a, host: 127.0.0.1, port: {port}}}\n"
        f"model: {{name: m, path: /models/m}}\nssh: {{known_hosts: {tmp_path / 'kh'}, ssh_config: []}}\n"
    )
    probe = (
        "import asyncio, sys\nfrom sparktui.core.config.config import load_config\n"
        "from sparktui.core.state.journal import Journal\nfrom sparktui.tui.controller import Controller\n"
        "c = Controller(load_config(sys.argv[1]), journal=Journal(), poll_interval=3600)\nc.prestart()\n"
        "import sparktui.tui.app\nc._early_start.result(30)\nposted = []\nc.attach(posted.append)\n"
        "print(sorted({type(m).__name__ + ':' + type(m.event).__name__ for m in posted}))\nc.abandon()\n"
    )
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, "-c", probe, str(cfg)],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=60,
        env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path)},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    said = r.stdout.strip().splitlines()[-1]
    assert "CoreEvent:NodeUpdated" in said and "CoreEvent:InventoryRound" in said, said
