"""One snapshot of a deployment: the record on the head is its JSON form, and records written before
the snapshot had live fields still load."""

from __future__ import annotations

import json

import pytest

from sparktui.core.state.deployment import Deployment
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.state.states import State
from sparktui.core.state.statefile import StateFileError

from .test_deploy_parts import two_node_plan

# A record as sparktui wrote it before (deployments/NAME.json on the head): exactly these keys.
OLD_RECORD = {
    "containers": {"n1": "sparktui-sparks-sglang-0", "n2": "sparktui-sparks-sglang-1"},
    "deployment": "sparks",
    "engine": "sglang",
    "head_ip": "192.168.100.10",
    "image": "lmsysorg/sglang:spark",
    "mode": "native",
    "nodes": ["n1", "n2"],
    "options": {"engine": "sglang", "tp": 2, "served_model_name": "qwen"},
    "plan_id": "abc123",
    "port": 30000,
    "pp": 1,
    "saved": 1764650000.5,
    "served_model_name": "qwen",
    "subnet": "192.168.100.0/24",
    "tp": 2,
    "version": 1,
}


def test_a_record_written_before_loads_with_its_head_and_writes_back_the_same_keys():
    d = Deployment.from_json(json.loads(json.dumps(OLD_RECORD)))
    assert (d.deployment, d.engine, d.mode, d.plan_id, d.port, d.head) == (
        "sparks",
        "sglang",
        "native",
        "abc123",
        30000,
        "n1",
    )
    assert d.options.tp == 2 and d.options.served_model_name == "qwen"
    assert d.state is State.IDLE and d.endpoint is None  # live fields start empty, never read from the file
    back = d.to_json()
    assert set(back) == set(OLD_RECORD)  # the live fields never reach the file
    assert {k: v for k, v in back.items() if k != "options"} == {k: v for k, v in OLD_RECORD.items() if k != "options"}


def test_live_fields_in_a_record_are_ignored_not_trusted():
    doctored = dict(OLD_RECORD, state="ready", endpoint="http://evil/v1", head="n2")
    d = Deployment.from_json(doctored)
    assert (d.state, d.endpoint, d.head) == (State.IDLE, None, "n1")


def test_a_record_without_its_engine_is_refused_by_name():
    with pytest.raises(StateFileError, match="'engine'"):
        Deployment.from_json({k: v for k, v in OLD_RECORD.items() if k != "engine"})


def test_from_a_plan_the_head_is_rank_zero_and_a_change_is_a_new_snapshot():
    plan = two_node_plan("vllm", "ray")
    d = Deployment.from_plan(plan, PlanOptions(engine="vllm"))
    assert d.head == plan.nodes[0].name and d.nodes == [n.name for n in plan.nodes]
    ready = d.but(state=State.READY, endpoint="http://h:8000/v1")
    assert ready is not d and d.state is State.IDLE and ready.state is State.READY and ready.plan_id == d.plan_id
