"""The controller: core events become messages, operations reach the deployer with what was confirmed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from tests.deployments import changed
from sparktui.core.diagnosis.diagnose import Milestone, Problem
from sparktui.core.state.events import ConnectionChanged, DeploymentChanged, LogLines, TransferProgress
from sparktui.core.nodes.facts import Container
from sparktui.core.nodes.inventory import analyse
from sparktui.core.state.journal import Entry, Journal
from sparktui.core.deploy.operations import Choices, Op, Prepared, Preview
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.tui import messages as M
from sparktui.tui.controller import Controller, InventoryRound, LogDrain

from ..fakes import FakeCluster
from .samples import spark_config, spark_facts


class StubDeployer:
    """Records calls; answers like the core's Deployer (same method names and shapes)."""

    def __init__(self, cluster, config, bus):
        self.name = config.cluster
        self.calls: list[tuple] = []
        self.target = None

    async def existing(self):
        return {
            "spark1": SimpleNamespace(
                node="spark1",
                error=None,
                containers=[Container("1", "sparktui-sparks-sglang-0", "img", "running", "Up")],
            ),
            "spark2": SimpleNamespace(node="spark2", error="connection lost", containers=[]),
        }

    async def plan_pivot(self, to=None):
        self.calls.append(("plan_pivot", to))
        return self.target

    async def plan_redeploy(self):
        self.calls.append(("plan_redeploy",))
        return self.target

    async def relaunch(self, plan, opts):
        self.calls.append(("relaunch", plan, opts))

    async def launch(self, plan, options=None, *, if_exists="ask"):
        self.calls.append(("launch", plan, if_exists))

    async def stop(self):
        self.calls.append(("stop",))
        return 2

    async def reattach(self):
        self.calls.append(("reattach",))
        return True


def no_head_lock(monkeypatch):
    """These controllers have no connection to a head to take the deployment's lock on; the lock itself
    is tested in tests/ssh/test_deploy_lock.py."""

    async def lock(self, op, deployment=None, **_):
        return None

    async def unlock(self, deployment=None):
        return None

    monkeypatch.setattr("sparktui.core.deploy.operations.Operations.lock", lock)
    monkeypatch.setattr("sparktui.core.deploy.operations.Operations.unlock", unlock)


def make(facts=None):
    cfg = spark_config()
    posted = []
    stubs = []

    def factory(*a):
        stubs.append(StubDeployer(*a))
        return stubs[-1]

    c = Controller(cfg, journal=Journal(), deployer_factory=factory, poll_interval=3600)
    c.attach(posted.append)
    c.inventory = analyse(cfg, facts or spark_facts())
    return c, posted, stubs


def test_log_batches_are_coalesced_into_one_waiting_message():
    c, posted, _ = make()
    for i in range(3):
        c.bus.emit(LogLines("spark1", "x", [f"line {i}"]))
    assert len(posted) == 1  # one message waits, however many batches arrive
    assert [b.lines for b in posted[0].event.take()] == [["line 0"], ["line 1"], ["line 2"]]
    assert posted[0].event.take() == []
    c.bus.emit(LogLines("spark2", "x", ["next"]))
    assert len(posted) == 2 and [b.node for b in posted[1].event.take()] == ["spark2"]


def test_core_events_become_messages():
    c, posted, _ = make()
    events = [
        ConnectionChanged("spark1", False, "gone"),
        LogLines("spark1", "x", ["a"]),
        TransferProgress("t", "model", "spark1", "spark2", "running"),
        Milestone("ready", 1, "spark1"),
        Problem("oom", 1, "m", "h", "spark1"),
        changed("sparks", "sglang", "native", "ready", "serving", "http://x/v1"),
        object(),
    ]
    for e in events:
        c.bus.emit(e)
    assert all(isinstance(m, M.CoreEvent) for m in posted)  # one message type, whatever the event
    kinds = [type(m.event) for m in posted]
    assert kinds == [ConnectionChanged, LogDrain, TransferProgress, Milestone, Problem, DeploymentChanged]
    assert posted[-1].event.state == "ready" and posted[-1].event.detail == "serving"
    entry = c.journal.start("spark1", "docker ps --filter label=API_TOKEN=abc123")
    c.journal.finish(entry, 0)
    assert isinstance(posted[-1].event, Entry) and "abc123" not in posted[-1].event.command


def planned(c, opts):
    return make_plan(c.config, c.inventory.facts, c.inventory.subnets, opts)


async def test_prepare_pivot_names_stops_and_starts_and_run_runs_that_plan(monkeypatch):
    no_head_lock(monkeypatch)
    c, _, stubs = make()
    target = planned(c, PlanOptions(engine="vllm", mode="ray"))
    c._get_deployer().target = (PlanOptions(engine="vllm"), target)

    async def no_conflicts(cluster, wanted, own):
        return []

    monkeypatch.setattr("sparktui.core.deploy.operations.port_conflicts", no_conflicts)
    prepared = await c.prepare("pivot")
    lines = prepared.preview.lines()
    assert lines[:3] == [
        "spark1:",
        "  stop  sparktui-sparks-sglang-0 (?, running)",
        f"  start {target.nodes[0].container} (vllm ray head, rank 0, {target.image})",
    ]
    assert "  stop  ? (cannot ask: connection lost)" in lines  # a node that could not be asked is said so
    await c.run(prepared)
    assert stubs[0].calls[-1] == ("relaunch", target, prepared.options)
    await c.close()


async def test_stop_reaches_the_deployer_and_a_plan_with_errors_never_runs(monkeypatch):
    no_head_lock(monkeypatch)
    c, _, stubs = make()
    prepared = await c.prepare("stop")
    assert await c.run(prepared) == "removed 2 container(s)"
    bad = Prepared(
        Op.LAUNCH,
        "sparks",
        Choices(),
        Preview("x"),
        plan=planned(c, PlanOptions(tp=3)),
        errors=["TP x PP must equal the GPUs in use"],
    )
    try:
        await c.run(bad)
    except Exception as e:  # noqa: BLE001
        assert "TP x PP" in str(e)
    else:
        raise AssertionError("a plan with errors must not launch")
    assert not any(call[0] == "launch" for call in stubs[0].calls)
    await c.close()


async def test_start_reattaches_when_containers_of_a_deployment_run(monkeypatch):
    facts = spark_facts()
    facts["spark1"].containers = [
        Container("1", "sparktui-sparks-sglang-0", "img", "running", "Up", {"sparktui.deployment": "sparks"})
    ]
    c, posted, stubs = make(facts)

    class Cluster:
        nodes = {}

        def __iter__(self):
            return iter(())

        async def connect_all(self):
            return {}

        async def close(self):
            pass

    async def take_inventory(cluster, config, on_facts=None):
        return analyse(config, facts)

    monkeypatch.setattr("sparktui.core.nodes.inventory.take_inventory", take_inventory)
    c.cluster = Cluster()
    await c.start()
    assert stubs and stubs[0].calls == [("reattach",)]
    assert any(isinstance(m.event, InventoryRound) for m in posted)
    await c.close()


async def test_core_work_runs_off_the_callers_loop():
    import threading

    c, _, _ = make()
    seen = {}

    async def where() -> str:
        seen["thread"] = threading.current_thread().name
        return "ok"

    assert await c._run(where()) == "ok"
    assert seen["thread"] == "sparktui-core" and threading.current_thread().name != "sparktui-core"
    await c.close()
    await c.close()  # twice is harmless (quit, then unmount)
    assert not c._core.running


async def test_a_pivot_to_an_image_that_cannot_load_the_model_is_refused_in_its_confirmation(monkeypatch):
    from sparktui.core.plan.support import Support

    c, _, stubs = make()
    image = c.config.images.vllm
    lacks = Support(
        engine="vllm",
        image=image,
        model_path=c.config.model.path,
        node="spark1",
        status="unsupported",
        reason="vLLM 0.11.0 has no Qwen3_5MoeForConditionalGeneration in its model registry",
        fix="an image whose vLLM lists it",
        model_type="qwen3_5_moe",
        engine_version="0.11.0",
    )
    target = planned(c, PlanOptions(engine="vllm", mode="ray", support=lacks))
    c._get_deployer().target = (PlanOptions(engine="vllm"), target)

    async def no_conflicts(cluster, wanted, own):
        return []

    monkeypatch.setattr("sparktui.core.deploy.operations.port_conflicts", no_conflicts)
    prepared = await c.prepare("pivot")
    assert any(
        f"{image} cannot load qwen3_5_moe" in e and "fix: an image whose vLLM lists it" in e for e in prepared.errors
    ), prepared.errors
    try:
        await c.run(prepared)
    except Exception as e:  # noqa: BLE001
        assert "cannot load" in str(e)
    else:
        raise AssertionError("a pivot to an image that cannot load the model must not run")
    assert not any(call[0] == "relaunch" for call in stubs[0].calls)
    await c.close()


async def test_a_round_begun_earlier_never_lands_after_a_later_one(monkeypatch):
    """Rounds overlap (the poll, the end of a copy, ctrl+r): a slow round that probed before the model was
    copied must not replace, when it ends, what a later round already showed (the form refused to launch
    with "model directory is missing" while the cards showed the model on both nodes)."""
    from sparktui.core.state.events import NodeUpdated

    c, posted, _ = make()
    before, after = analyse(c.config, spark_facts(model_on_spark2=False)), analyse(c.config, spark_facts())
    entered, release = asyncio.Event(), asyncio.Event()
    calls = []

    async def take_inventory(cluster, config, on_facts=None):
        calls.append(len(calls))
        if len(calls) == 1:  # the slow round: probed before the copy, answers last
            entered.set()
            await release.wait()
            inv = before
        else:
            inv = after
        for f in inv.facts.values():
            on_facts(None, f)
        return inv

    monkeypatch.setattr("sparktui.core.nodes.inventory.take_inventory", take_inventory)
    c.cluster = FakeCluster()  # no node answers: no image is inspected
    slow = asyncio.ensure_future(c._refresh())
    await entered.wait()
    await c._refresh()  # the later round lands first
    release.set()
    assert await slow is after  # the slow round answers with the freshest inventory, not its own
    rounds = [m.event for m in posted if isinstance(m.event, InventoryRound)]
    assert rounds and all(r.inventory is after for r in rounds)
    spark2 = [m.event.facts for m in posted if isinstance(m.event, NodeUpdated) and m.event.facts.name == "spark2"]
    assert spark2[-1] is after.facts["spark2"] and before.facts["spark2"] not in spark2
    assert c.inventory is after
    await c.close()
