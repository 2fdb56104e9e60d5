"""One state vocabulary on screen: every State styled, operations in flight worded, and the app's one
deployment snapshot following the core's events."""

from __future__ import annotations

from tests.deployments import changed
from sparktui.core.state.deployment import Deployment
from sparktui.core.state.events import EndpointChecked
from sparktui.core.state.states import Op, State
from sparktui.core.state.words import operation_doing
from sparktui.tui.app import SparkApp
from sparktui.tui.present.deploy import STATE_STYLE

from .conftest import screen_text, wait_for

NODES_URL = "http://192.168.100.10:8000/v1"
LOCAL_URL = "http://127.0.0.1:40123/v1"


def test_every_state_has_a_style_and_every_style_is_a_state():
    assert set(STATE_STYLE) == set(State)
    assert all(isinstance(k, State) for k in STATE_STYLE)


def test_operations_in_flight_are_worded_and_know_their_prepare_step():
    assert Op.PIVOT.preparing is Op.PREPARE_PIVOT and operation_doing(Op.PIVOT.preparing) == "preparing pivot"
    assert operation_doing(Op.SYNC_MODEL) == "syncing model" and operation_doing("sync_model") == "syncing model"
    assert [o for o in Op if o.starts_engine] == [Op.LAUNCH, Op.PIVOT, Op.REDEPLOY]


async def test_the_app_holds_one_snapshot_replaced_by_each_event(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(140, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="first inventory")
        first = app.deployment
        assert isinstance(first, Deployment) and first.state is State.IDLE
        core.bus.emit(changed("sparks", "vllm", "ray", State.READY, "serving", NODES_URL))
        await wait_for(pilot, lambda: app.deploy_state == "ready", what="ready")
        ready = app.deployment
        assert ready is not first and first.state is State.IDLE  # replaced, never mutated
        assert (ready.deployment, ready.engine, ready.mode, ready.endpoint) == ("sparks", "vllm", "ray", NODES_URL)
        core.bus.emit(EndpointChecked("sparks", NODES_URL, LOCAL_URL, "qwen", 0.5, 3, None))
        await wait_for(pilot, lambda: app.local_endpoint == LOCAL_URL, what="the forward")
        assert f"local {LOCAL_URL}" in screen_text(app).splitlines()[0]  # the status line follows the snapshot
        assert app.check_action("stop", ()) is True  # a ready deployment is active: it can be stopped
        core.bus.emit(changed("sparks", "vllm", "ray", State.STOPPED, "removed 2 container(s)"))
        await wait_for(pilot, lambda: app.deploy_state == "stopped", what="stopped")
        assert (app.endpoint, app.local_endpoint) == (None, None)
        assert app.check_action("stop", ()) is None  # nothing runs any more
