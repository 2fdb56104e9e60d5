"""Where a deployment stands, as the Deployer tells it: for the tests that play the core's part."""

from __future__ import annotations

from sparktui.core.state.deployment import Deployment
from sparktui.core.state.events import DeploymentChanged
from sparktui.core.state.states import State


def changed(
    name: str, engine: str, mode: str, state: State | str, detail: str = "", endpoint: str | None = None
) -> DeploymentChanged:
    """The event with its snapshot: a deployment with no record behind it (options None), at `state`."""
    return DeploymentChanged(Deployment(name, engine, mode, None, state=State(state), detail=detail, endpoint=endpoint))
