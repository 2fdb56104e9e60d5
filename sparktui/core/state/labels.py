"""The docker labels on every container sparktui starts, named once.

Containers are found and removed by these labels only; nothing without them is ever touched.
"""

from __future__ import annotations

DEPLOYMENT = "sparktui.deployment"  # the deployment's name (config.cluster unless chosen)
ENGINE = "sparktui.engine"  # sglang | vllm
ROLE = "sparktui.role"  # head | worker
RANK = "sparktui.rank"  # 0 = head
PLAN = "sparktui.plan"  # the plan's hash: a resumed launch recognises its own containers
PREFLIGHT = "sparktui.preflight"  # the rendezvous check's short-lived containers


def engine_of(labels: dict[str, str]) -> str:
    return labels.get(ENGINE, "?")


def plan_of(labels: dict[str, str]) -> str:
    return labels.get(PLAN, "?")
