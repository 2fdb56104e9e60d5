"""A scripted core: the controller's interface, with operations that replay recorded engine output.

Log lines come from recordings/ (captured from the engine simulator); milestones and problems come
from feeding them to the real Diagnoser, and node facts from real probe output. The replay yields
to the event loop between batches, so the UI renders while it streams, as with a live cluster.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from types import SimpleNamespace
from pathlib import Path

from sparktui.core.config.config import Config
from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.state.events import (
    ConnectionChanged,
    DeploymentChanged,
    LaunchStep,
    LogLines,
    NodeUpdated,
    TransferProgress,
)
from sparktui.core.nodes.facts import NodeFacts
from sparktui.core.nodes.inventory import analyse
from sparktui.core.state.deployment import Deployment
from sparktui.core.state.journal import Journal
from sparktui.core.state.states import State
from sparktui.core.plan.plan import Plan, PlanOptions
from sparktui.core.deploy.operations import Choices, Op, Prepared, Preview, starts_of
from sparktui.core.state.events import PreflightFinished, PreflightNode, PreflightStarted
from sparktui.core.preflight.leftovers import Leftovers, Stale
from sparktui.core.plan.plan import make_plan
from sparktui.core.memory.free import DROP_SCRIPT
from sparktui.core.preflight import NodeResult, Setting, Verdict, explain, judge_memory
from sparktui.core.nodes.probes import parse_meminfo
from sparktui.tui.controller import Controller, InventoryRound
from sparktui.tui.messages import CoreEvent
from tests.fakes import FakeCluster, FakeNode

RECORDINGS = Path(__file__).resolve().parent / "recordings"
BATCH = 4  # lines per LogLines event, like a container log read in chunks


def recording(name: str) -> dict[str, list[str]]:
    return {p.stem: p.read_text().splitlines() for p in sorted((RECORDINGS / name).glob("*.log"))}


def dropped(meminfo: str, left_kb: int = 600_000) -> str:
    """/proc/meminfo after `echo 3 > /proc/sys/vm/drop_caches`: the page cache, all but a little, is free."""
    kb = {k: int(v) for k, v in re.findall(r"^(MemFree|Cached|Buffers):\s+(\d+)", meminfo, re.M)}
    freed = kb.get("Cached", 0) + kb.get("Buffers", 0) - left_kb
    out = re.sub(r"^MemFree:\s+\d+", f"MemFree:        {kb['MemFree'] + freed}", meminfo, flags=re.M)
    out = re.sub(r"^Cached:\s+\d+", f"Cached:         {left_kb}", out, flags=re.M)
    return re.sub(r"^Buffers:\s+\d+", "Buffers:        0", out, flags=re.M)


class ScriptedCore(Controller):
    def __init__(self, config: Config, facts: dict[str, NodeFacts]) -> None:
        super().__init__(config, journal=Journal(), threaded=False)  # replays on the app's loop
        self._facts = facts
        self._snapshot: Deployment | None = None  # where the scripted deployment stands (Deployer.current)
        self.calls: list[tuple[str, object]] = []
        self.now = 1_764_000_000.0  # the Diagnoser's clock: advanced by the script, never by waiting
        self.release = asyncio.Event()  # set by a test to let a held step go on
        self.hold_sync = False
        self.futile: list[str] = []  # what the support check says before a model copy (none: every image loads it)
        self.fail_preflight: str | None = None  # a node whose preflight fails
        self.stale: dict[str, list[str]] = {}  # node -> stopped containers earlier launches left there
        self.plan: Plan | None = None
        self.options: PlanOptions | None = None
        self.meminfo: dict[str, str] = {}  # /proc/meminfo per node as the preflight reads it (none: not judged)
        self.cluster = FakeCluster([FakeNode(n.name, self._answer) for n in config.nodes])

    def _answer(self, node: str, command: str) -> SimpleNamespace:
        """A node as core.memfree.drop_caches sees it: its meminfo now, and a drop that frees the cache."""
        self.calls.append(("run", (node, command)))
        before = self.meminfo.get(node, "")
        if command != DROP_SCRIPT or not before:
            return SimpleNamespace(ok=False, stdout="", stderr="sh: unexpected command", exit_status=127)
        after = self.meminfo[node] = dropped(before)
        self._facts[node].memory = parse_meminfo(after)
        return SimpleNamespace(ok=True, stdout=f"{before}@@after\n{after}", stderr="", exit_status=0)

    # -- start-up -----------------------------------------------------------------------------
    async def start(self) -> None:
        for n in self.config.nodes:
            self.bus.emit(ConnectionChanged(n.name, True))
            e = self.journal.start(n.name, "sh -c '<probe script>'")
            self.journal.finish(e, 0)
        self.inventory = analyse(self.config, self._facts)
        for f in self.inventory.facts.values():
            self.bus.emit(NodeUpdated(f))
        self._post(CoreEvent(InventoryRound(self.inventory)))

    async def refresh(self):
        await self.start()
        return self.inventory

    async def _refresh_quietly(self) -> None:
        await self.start()

    # -- deployments ----------------------------------------------------------------------------
    def _state(self, plan: Plan, state: str, detail: str = "", endpoint: str | None = None) -> None:
        """A new snapshot, as the Deployer makes one: a launch's own, keeping the endpoint it proved."""
        cur = self._snapshot
        if cur is None or cur.plan_id != plan.plan_id:
            cur = Deployment.from_plan(plan, PlanOptions(engine=plan.engine))
        self._snapshot = cur.but(state=State(state), detail=detail, endpoint=endpoint or cur.endpoint)
        self.bus.emit(DeploymentChanged(self._snapshot))

    async def _replay(self, plan: Plan, name: str) -> None:
        self._state(plan, "starting", f"starting {plan.engine} on {len(plan.nodes)} nodes")
        total = len(plan.steps)
        for i, step in enumerate(plan.steps):
            self.bus.emit(LaunchStep(plan.deployment, step.node, i, total, step.kind, step.description, "done"))
            e = self.journal.start(step.node, step.display)
            self.journal.finish(e, 0)
        diag = Diagnoser(plan.engine, hang_after=self.config.engine.hang_after, clock=lambda: self.now)
        logs = recording(name)
        containers = {n.name: n.container for n in plan.nodes}
        cursors = {node: 0 for node in logs}
        loading = False
        while any(cursors[n] < len(lines) for n, lines in logs.items()):
            for node, lines in logs.items():
                start = cursors[node]
                batch = lines[start : start + BATCH]
                if not batch:
                    continue
                cursors[node] = start + len(batch)
                self.now += 0.5
                self.bus.emit(LogLines(node, containers.get(node, node), batch))
                for ev in diag.feed_lines(batch, node):
                    self.bus.emit(ev)
                if not loading and any(m.kind == "weights_loading" for m in diag.milestones):
                    loading = True
                    self._state(plan, "loading", "loading weights")
                await asyncio.sleep(0)  # let the app draw between batches
        if diag.ready:
            self._state(plan, "ready", "serving", f"http://{plan.head_ip}:{plan.port}/v1")
            return
        self.now += self.config.engine.hang_after + 1  # silence, as the engines fall silent
        for ev in diag.tick():
            self.bus.emit(ev)
        problem = next((p for p in diag.problems if p.kind == "rendezvous_hang"), None)
        self._state(plan, "hung", problem.message if problem else "no progress")

    async def launch(self, plan: Plan, options: PlanOptions | None = None, replace: bool = False) -> None:
        self.calls.append(("launch", plan))
        self.plan, self.options = plan, options
        await self._replay(plan, "sglang_hang" if plan.engine == "sglang" else "vllm_ray")

    async def stop(self) -> str:
        self.calls.append(("stop", None))
        if self.plan is None:
            return "nothing to stop"
        self._state(self.plan, "stopping", "stopping containers")
        for n in self.plan.nodes:
            e = self.journal.start(n.name, f"docker rm -f {n.container}")
            self.journal.finish(e, 0)
        self._state(self.plan, "stopped", f"removed {len(self.plan.nodes)} container(s)")
        return f"removed {len(self.plan.nodes)} container(s)"

    def make_plan(self, opts: PlanOptions) -> Plan:
        return make_plan(self.config, self.inventory.facts, self.inventory.subnets, opts)

    async def prepare(self, op, choices: Choices | None = None) -> Prepared:
        op, ch = Op(op), choices or Choices()
        self.calls.append(("prepare", op.value))
        plan = self.plan
        stops = [(n.name, f"{n.container} (running)") for n in plan.nodes] if plan else []
        if op is Op.STOP:
            return Prepared(op, "sparks", ch, Preview("Stop deployment sparks", stops))
        if op in (Op.SYNC_MODEL, Op.SYNC_IMAGE):
            return Prepared(op, "sparks", ch, Preview("copy"), futile=list(self.futile) if op is Op.SYNC_MODEL else [])
        if op is Op.LAUNCH:
            target = self.make_plan(ch.options or PlanOptions())
            return Prepared(
                op,
                "sparks",
                ch,
                Preview("Launch sparks", [], starts_of(target)),
                plan=target,
                options=ch.options,
                errors=list(target.errors),
                warnings=list(target.warnings),
            )
        if plan is None:
            return Prepared(
                op, "sparks", ch, Preview(op.value), errors=["no record of deployment sparks: launch it first"]
            )
        opts = self.options or PlanOptions(tp=plan.tp, pp=plan.pp, rendezvous=plan.subnet)
        if op is Op.PIVOT:  # the other engine, same model, TP/PP, nodes and network
            opts = replace(
                opts, engine="vllm" if plan.engine == "sglang" else "sglang", mode=None, image=None, port=None
            )
        target = self.make_plan(opts)
        return Prepared(
            op,
            "sparks",
            ch,
            Preview(f"{op.value} to {target.engine}", stops, starts_of(target)),
            plan=target,
            options=opts,
            errors=list(target.errors),
            replaces=True,
        )

    async def preflight(self, prepared: Prepared):
        """Every node meets the head over TCP, unless `fail_preflight` names a node that cannot reach it."""
        plan = prepared.plan
        self.calls.append(("preflight", plan))
        names = [n.name for n in plan.nodes]
        self.bus.emit(PreflightStarted("sparks", names, plan.subnet, plan.head_ip, plan.image))
        v = Verdict(
            Setting(
                plan.head_ip,
                plan.dist_port,
                plan.subnet,
                plan.image,
                30.0,
                plan.engine,
                names[0],
                ranks={n.rank: n.name for n in plan.nodes},
            ),
            seconds=1.5,
        )
        for n in plan.nodes:
            if n.name == self.fail_preflight:
                r = NodeResult.failed(
                    n.name, n.rank, n.iface, n.ip, "unreachable", f"{plan.head_ip}:{plan.dist_port} timed out"
                )
                r.reason, r.fix = explain(r, v.setting)
            else:
                r = NodeResult(
                    n.name,
                    n.rank,
                    n.iface,
                    n.ip,
                    ok=True,
                    path="tcp",
                    transport="tcp",
                    seconds=0.4,
                    bandwidth_gb_s=1.25,
                )
            v.nodes[n.name] = r
            self.bus.emit(PreflightNode("sparks", r))
            await asyncio.sleep(0)
        judge_memory(v, {k: parse_meminfo(t) for k, t in self.meminfo.items()}, plan.unified, plan.mem_fraction)
        for node, names in self.stale.items():
            v.leftovers[node] = Leftovers(node, stale=[Stale(c, "old", "sglang", "exited") for c in names])
        self.bus.emit(PreflightFinished("sparks", v, v.summary()))
        return v

    async def remove_stale(self, stale: dict[str, list[str]]) -> list[dict]:
        self.calls.append(("remove_stale", stale))
        removed = [{"node": n, "removed": list(names), "error": None} for n, names in stale.items()]
        self.stale = {}
        return removed

    async def run(self, prepared: Prepared, force: bool = False) -> str:
        op = prepared.op
        if op is Op.LAUNCH:
            await self.launch(prepared.plan, prepared.options)
            return ""
        if op is Op.STOP:
            return await self.stop()
        if op is Op.SYNC_MODEL:
            return await self.sync_model(prepared.choices.dests)
        if op is Op.SYNC_IMAGE:
            return await self.sync_image(prepared.choices.engine_or_image)
        self.calls.append((op.value, prepared.plan))
        await self.stop()
        self.plan, self.options = prepared.plan, prepared.options
        await self._replay(prepared.plan, "sglang_hang" if prepared.plan.engine == "sglang" else "vllm_ray")
        return ""

    # -- transfers --------------------------------------------------------------------------------
    async def sync_model(self, dests=None) -> str:
        self.calls.append(("sync_model", dests))
        total = self._facts["spark1"].model.bytes or 0
        tid = "model-spark2-1"
        self.bus.emit(TransferProgress(tid, "model", "spark1", "spark2", "preparing", total_bytes=total))
        for pct in (5, 25, 50):
            self.bus.emit(
                TransferProgress(
                    tid,
                    "model",
                    "spark1",
                    "spark2",
                    "running",
                    bytes=total * pct // 100,
                    total_bytes=total,
                    percent=pct,
                    rate=430e6,
                    eta=(total * (100 - pct) / 100) / 430e6,
                    elapsed=pct * 3.0,
                    files_done=pct // 2,
                    files_total=57,
                )
            )
            await asyncio.sleep(0)
        if self.hold_sync:
            await self.release.wait()
        self.bus.emit(
            TransferProgress(
                tid, "model", "spark1", "spark2", "verifying", bytes=total, total_bytes=total, percent=100.0
            )
        )
        self.bus.emit(
            TransferProgress(
                tid,
                "model",
                "spark1",
                "spark2",
                "done",
                bytes=total,
                total_bytes=total,
                percent=100.0,
                files_total=57,
                message="verified: 57 files, sizes match the source",
            )
        )
        return "spark2: verified: 57 files, sizes match the source"

    async def sync_image(self, engine=None) -> str:
        self.calls.append(("sync_image", engine))
        return "every node already has the image"
