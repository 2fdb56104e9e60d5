"""Who holds a port the plan needs: a process `docker exec` started in this deployment's own container is
its own engine (the plan stops it), even where the node has no container cgroups to say so."""

from __future__ import annotations

import json

from sparktui.core.network.ports import parse_holders

OWN = "a" * 64
OTHER = "b" * 64


def _output(ns: str, cgroup: str = "") -> str:
    ps = [
        {
            "ID": OWN,
            "Names": "sparktui-sparks-vllm-0",
            "Image": "i",
            "State": "running",
            "Status": "Up 1 minute",
            "Labels": "sparktui.deployment=sparks,sparktui.engine=vllm",
        },
        {
            "ID": OTHER,
            "Names": "sparktui-lab-sglang-0",
            "Image": "i",
            "State": "running",
            "Status": "Up 1 hour",
            "Labels": "sparktui.deployment=lab,sparktui.engine=sglang",
        },
    ]
    return "\n".join(
        [
            "@@ss",
            'LISTEN 0 4096 0.0.0.0:8000 0.0.0.0:* users:(("python3",pid=4242,fd=21))',
            "@@tcp",
            f"@@pid 4242 cg={cgroup} ns={ns}",
            "@@cns self pid:[4026531836]",
            f"@@cns {OWN} pid:[4026532999]",
            f"@@cns {OTHER} pid:[4026533111]",
            "@@ps",
            *(json.dumps(r) for r in ps),
        ]
    )


def test_a_port_held_in_this_deployments_own_container_is_not_a_conflict():
    # no container cgroup (the demo's nodes), but the process is in the container's PID namespace
    assert parse_holders("spark1", _output("pid:[4026532999]"), {8000: "HTTP port"}, {OWN}) == []


def test_a_port_held_in_another_deployments_container_names_that_deployment():
    (h,) = parse_holders("spark1", _output("pid:[4026533111]"), {8000: "HTTP port"}, {OWN})
    assert h.deployment == "lab" and h.container == "sparktui-lab-sglang-0"
    assert "taken by deployment lab" in h.sentence()


def test_a_host_process_is_named_as_itself():
    (h,) = parse_holders("spark1", _output("pid:[4026531836]"), {8000: "HTTP port"}, {OWN})
    assert h.container is None and h.process == "python3 (pid 4242)"


def test_the_cgroup_still_names_the_container_where_there_is_one():
    assert parse_holders("spark1", _output("", cgroup=OWN), {8000: "HTTP port"}, {OWN}) == []
