"""Where the Deployer's deployment stands lives in one place: its current snapshot (a Deployment), replaced on
each change, never beside it in attributes of its own."""

from __future__ import annotations

from sparktui.core.deploy.orchestrator import Deployer
from sparktui.core.state.deployment import Deployment
from sparktui.core.state.events import DeploymentChanged, EventBus
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.state.states import State

from .test_plan import plan_for
from tests.configs import make_config

URL = "http://192.168.100.10:30000/v1"


def deployer() -> tuple[Deployer, list[DeploymentChanged]]:
    bus = EventBus()
    seen: list[DeploymentChanged] = []
    bus.subscribe(lambda e: seen.append(e) if isinstance(e, DeploymentChanged) else None)
    return Deployer(None, make_config(2), bus, planner=lambda o: None), seen


async def test_state_detail_and_endpoint_are_the_snapshots_and_a_ready_snapshot_carries_the_endpoint():
    d, seen = deployer()
    assert d.current.state is State.STOPPED and not d.current.known  # nothing launched yet
    assert not {"state", "detail", "endpoint"} & set(vars(d))  # no second copy beside the snapshot
    plan, _ = plan_for(2, engine="sglang")
    try:
        d._begin(Deployment.from_plan(plan, PlanOptions(engine="sglang")))
        assert d.current.known and d.current.plan_id == plan.plan_id and d.current.state is State.STOPPED
        d._set("starting", "2 steps")
        starting = d.current
        d._set("ready", "qwen answered in 0.20 s", URL)
        ready = d.current
        assert ready is not starting and (starting.state, starting.endpoint) == (State.STARTING, None)
        assert (ready.state, ready.detail, ready.endpoint) == (State.READY, "qwen answered in 0.20 s", URL)
        assert await d.wait(0) is State.READY
        assert [(e.state, e.detail, e.endpoint) for e in seen] == [
            (State.STARTING, "2 steps", None),
            (State.READY, "qwen answered in 0.20 s", URL),
        ]
        assert seen[-1].engine == ready.engine == "sglang"
        assert [e.deployment for e in seen] == [starting, ready] and seen[-1].deployment is ready  # the snapshots

        d._set("unhealthy", f"{URL}: refused")  # the endpoint stays known; only a ready event tells it
        assert d.current.endpoint == URL and seen[-1].endpoint is None
        d._set("unhealthy", f"{URL}: refused")  # nothing new: no event, the same snapshot
        assert len(seen) == 3

        d._begin(Deployment.from_plan(plan, PlanOptions(engine="sglang")))  # a new launch proves its endpoint anew
        assert (d.current.state, d.current.endpoint) == (State.UNHEALTHY, None)
    finally:
        await d.close()
    assert ready.endpoint == URL  # a snapshot handed out earlier never changes under its holder
