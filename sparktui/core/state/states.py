"""A deployment's states and the operations in flight, each as one enum (a str, so JSON, the journal and
older comparisons read the plain word: `State.READY == "ready"`)."""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    def __str__(self) -> str:
        return self.value

    def __hash__(self) -> int:  # as the plain word's, so dicts and sets keyed by the word find it
        return hash(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class State(_Word):
    IDLE = "idle"  # nothing launched or found yet
    STARTING = "starting"  # steps running on the nodes
    LOADING = "loading"  # the engine is loading weights
    READY = "ready"  # the endpoint answered a chat completion
    UNHEALTHY = "unhealthy"  # was ready; the endpoint stopped answering its health check
    WEDGED = "wedged"  # was ready; /health answers but no token comes out (core/serving/liveness.py)
    FAILED = "failed"
    HUNG = "hung"  # silent in distributed init past the hang threshold
    STOPPING = "stopping"
    STOPPED = "stopped"
    # Before the deployer runs, a front shows these in the launch pane; the deployer never enters them.
    PREFLIGHT = "preflight"  # the rendezvous is being checked on the nodes
    REFUSED = "refused"  # the checks or the preflight said no: nothing was started

    @property
    def settled(self) -> bool:
        return self in SETTLED

    @property
    def bad(self) -> bool:
        return self in (State.FAILED, State.HUNG, State.UNHEALTHY, State.WEDGED)

    @property
    def active(self) -> bool:
        """Something of the deployment runs on the nodes: stop, pivot and redeploy make sense."""
        return self in ACTIVE


SETTLED = (State.READY, State.FAILED, State.HUNG, State.STOPPED)
ACTIVE = (State.STARTING, State.LOADING, State.READY, State.UNHEALTHY, State.WEDGED, State.HUNG, State.FAILED)
# What the log diagnoser can tell on its own (core/diagnosis/diagnose.py); the rest comes from the orchestrator.
FROM_LOGS = (State.STARTING, State.LOADING, State.READY, State.WEDGED, State.FAILED, State.HUNG)


class Op(_Word):
    """An operation: what the core's Operations prepare and run, and what a front shows as in flight."""

    LAUNCH = "launch"
    PIVOT = "pivot"
    REDEPLOY = "redeploy"
    STOP = "stop"
    SYNC_MODEL = "sync_model"
    SYNC_IMAGE = "sync_image"
    # in flight in a front only: around the operations above, or of their own
    PREPARE_LAUNCH = "prepare_launch"
    PREPARE_PIVOT = "prepare_pivot"
    PREPARE_REDEPLOY = "prepare_redeploy"
    PREPARE_STOP = "prepare_stop"
    REPLACE = "replace"
    CHECK = "check"  # the launch form's preflight
    DROP_CACHES = "drop_caches"
    REFRESH = "refresh"
    CONNECT = "connect"

    @property
    def starts_engine(self) -> bool:
        return self in (Op.LAUNCH, Op.PIVOT, Op.REDEPLOY)

    @property
    def preparing(self) -> "Op":
        """The step before it runs: planned, checked and confirmed (`prepare_launch` for a launch)."""
        return Op(f"prepare_{self.value}")
