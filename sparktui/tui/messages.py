"""Textual messages the controller posts for core events (post_message is safe from any thread).

`to_message` maps a core event to its message; the app's @on handlers own the state they carry.
"""
from __future__ import annotations

from typing import Any, Callable

from textual.message import Message

from ..core.diagnose import Milestone, Problem, ProblemCleared
from ..core.events import (ConnectionChanged, DeploymentChanged, EndpointChecked, EndpointHealth, LaunchStep, LogLines,
                           NodeUpdated, PreflightFinished, PreflightNode, PreflightStarted, ServingStats,
                           TransferProgress)
from ..core.facts import NodeFacts
from ..core.journal import Entry


class CoreMessage(Message):
    """Base of every message that carries a core event."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event


class FactsChanged(CoreMessage):
    """NodeUpdated: fresh facts for one node."""

    @property
    def facts(self) -> NodeFacts:
        return self.event.facts


class InventoryChanged(Message):
    """A whole inventory round finished: facts for every node plus the subnets joining them."""

    def __init__(self, inventory: Any, model_config: dict | None = None, last_subnet: str | None = None) -> None:
        super().__init__()
        self.inventory = inventory
        self.model_config = model_config  # the model's config.json (the form checks TP against its heads)
        self.last_subnet = last_subnet  # the subnet the deployment's last launch used: part of the fabric


class LinkChanged(CoreMessage):
    """ConnectionChanged: a node's SSH link went up or down."""


class TransferChanged(CoreMessage):
    """TransferProgress for one destination."""


class LogArrived(CoreMessage):
    """LogLines: a batch of lines from one node."""


class LogsArrived(Message):
    """Every LogLines batch that came in since the last of these was handled (the controller
    coalesces them, so a flood is one message in the queue and a key press never waits behind it)."""

    def __init__(self, take: Callable[[], list]) -> None:
        super().__init__()
        self.take = take  # returns every batch queued so far, and lets the next message be posted


class MilestoneReached(CoreMessage):
    """A diagnose.Milestone: how far the start got on a node."""


class ProblemFound(CoreMessage):
    """A diagnose.Problem, with its hint."""


class ProblemWithdrawn(CoreMessage):
    """A diagnose.ProblemCleared: an earlier problem turned out harmless."""


class DeploymentStateChanged(CoreMessage):
    """The orchestrator's DeploymentChanged: state (and a message) of the deployment."""

    @property
    def state(self) -> str:
        return self.event.state

    @property
    def detail(self) -> str:
        return self.event.detail


class StepChanged(CoreMessage):
    """LaunchStep: one step of a launch on one node started, finished, was skipped or failed."""


class EndpointReady(CoreMessage):
    """EndpointChecked: the endpoint answered a chat completion."""


class PreflightBegan(CoreMessage):
    """PreflightStarted: the rendezvous check runs on these nodes."""


class PreflightRow(CoreMessage):
    """PreflightNode: one node's result (transport, seconds, bandwidth, verdict)."""


class PreflightDone(CoreMessage):
    """PreflightFinished: the verdict (None when the check could not run) and its summary."""


class HealthChanged(CoreMessage):
    """EndpointHealth: a ready endpoint's health poll (ok, or why not)."""


class ServingChanged(CoreMessage):
    """ServingStats: a ready deployment's metrics after a scrape (or why there are none)."""


class JournalAdded(Message):
    """A remote command finished (Journal.listeners)."""

    def __init__(self, entry: Entry) -> None:
        super().__init__()
        self.entry = entry


class OperationFailed(Message):
    """A core operation raised: shown to the user, never a crash."""

    def __init__(self, what: str, error: str) -> None:
        super().__init__()
        self.what = what
        self.error = error


class OperationDone(Message):
    """A core operation finished; `result` is its plain-words outcome."""

    def __init__(self, what: str, result: str = "") -> None:
        super().__init__()
        self.what = what
        self.result = result


_BY_TYPE: list[tuple[type, type[CoreMessage]]] = [
    (NodeUpdated, FactsChanged), (ConnectionChanged, LinkChanged), (TransferProgress, TransferChanged),
    (LogLines, LogArrived), (Milestone, MilestoneReached), (Problem, ProblemFound),
    (ProblemCleared, ProblemWithdrawn), (DeploymentChanged, DeploymentStateChanged), (LaunchStep, StepChanged),
    (EndpointChecked, EndpointReady), (PreflightStarted, PreflightBegan), (PreflightNode, PreflightRow),
    (PreflightFinished, PreflightDone), (EndpointHealth, HealthChanged), (ServingStats, ServingChanged),
]


def to_message(event: Any) -> Message | None:
    """The message for a core event; None for events the UI does not show."""
    for etype, mtype in _BY_TYPE:
        if isinstance(event, etype):
            return mtype(event)
    return None


class Refused(Message):
    """A prepared operation failed its checks (plan errors, the fabric, ports held): nothing ran."""

    def __init__(self, prepared: Any) -> None:
        super().__init__()
        self.prepared = prepared


class PreflightAsked(Message):
    """A prepared launch, pivot or redeploy passed its checks; its preflight starts now."""

    def __init__(self, prepared: Any) -> None:
        super().__init__()
        self.prepared = prepared


class Confirmed(Message):
    """A prepared operation runs now (checked, preflighted, confirmed where it asks)."""

    def __init__(self, prepared: Any) -> None:
        super().__init__()
        self.prepared = prepared
