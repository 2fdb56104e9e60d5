"""The deployment's vocabularies, each as one enum: its states, the operations in flight, the start-up
phases, the milestones and the problems the logs show, and what a node's preflight check failed of. Each is a str, so JSON, the journal and older
comparisons read the plain word (`State.READY == "ready"`); `words.py` says each in plain words."""

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


class Phase(_Word):
    """A start-up phase of a distributed engine, in the order every start walks them (core/diagnosis/phases.py)."""

    CONTAINER = "container"
    RAY_JOIN = "ray_join"
    DIST_INIT = "dist_init"
    NCCL_INIT = "nccl_init"
    WEIGHTS = "weights"
    KV_CACHE = "kv_cache"
    GRAPHS = "graphs"
    HTTP_UP = "http_up"
    FIRST_REQUEST = "first_request"  # serving


class MilestoneKind(_Word):
    """How far a start got, as the logs show it (core/diagnosis/diagnose.py)."""

    CONTAINER_STARTED = "container_started"
    RAY_STARTED = "ray_started"
    RAY_CONNECTED = "ray_connected"
    DIST_INIT_BEGIN = "dist_init_begin"
    DIST_INIT_END = "dist_init_end"
    TRANSPORT = "transport"  # what carries the collectives: NCCL over RDMA or sockets, or gloo (CPU builds)
    NCCL_NET = "nccl_net"  # the network a rank's NCCL uses, against the plan (core/network/fabric_live.py)
    WEIGHTS_LOADING = "weights_loading"
    SLOW_LOAD = "slow_load"
    KV_CACHE = "kv_cache"
    CUDA_GRAPH = "cuda_graph"
    READY = "ready"

    @classmethod
    def _missing_(cls, value: object) -> "MilestoneKind | None":
        return _OLD_MILESTONES.get(value) if isinstance(value, str) else None


# Words written before a rename, still read from saved output: the transport milestone also names gloo.
_OLD_MILESTONES = {"nccl_transport": MilestoneKind.TRANSPORT}


class ProblemKind(_Word):
    """What went wrong: the log signs' (core/engines/logsigns.py and each engine's own), the diagnoser's and
    the orchestrator's. An engine may name a kind of its own in its `signs`; it reads as its plain word."""

    # read in the logs
    BAD_ARGUMENTS = "bad_arguments"
    CHECKPOINT_INCOMPLETE = "checkpoint_incomplete"
    ENGINE_DIED = "engine_died"
    HOST_OOM = "host_oom"
    MODEL_NOT_FOUND = "model_not_found"
    NCCL_ERROR = "nccl_error"
    OUT_OF_MEMORY = "out_of_memory"
    PORT_IN_USE = "port_in_use"
    RANK_UNREACHABLE = "rank_unreachable"
    RAY_CONNECT = "ray_connect"
    RAY_MISSING = "ray_missing"
    RAY_NODE_IP = "ray_node_ip"
    RAY_RESOURCES = "ray_resources"
    RAY_UNSUPPORTED = "ray_unsupported"
    RENDEZVOUS_HANG = "rendezvous_hang"
    SEMAPHORE_LOST = "semaphore_lost"
    SEMAPHORE_TRAP = "semaphore_trap"
    STALLED = "stalled"
    STOPPED = "stopped"  # a saved log that ends before serving
    TRACEBACK = "traceback"
    UNSUPPORTED_MODEL = "unsupported_model"
    WARMUP_TIMEOUT = "warmup_timeout"
    WATCHDOG_TIMEOUT = "watchdog_timeout"
    WEDGED = "wedged"
    # seen by the orchestrator and its memory guard
    CONTAINER_EXITED = "container_exited"
    ENDPOINT_UNHEALTHY = "endpoint_unhealthy"
    LAUNCH_STEP_FAILED = "launch_step_failed"
    LAUNCH_TIMEOUT = "launch_timeout"
    LOG_STREAM_LOST = "log_stream_lost"
    MEMORY_FLOOR = "memory_floor"
    MEMORY_LOW = "memory_low"
    MEMORY_PRESSURE = "memory_pressure"
    NOT_READY = "not_ready"
    RESUMED_BROKEN = "resumed_broken"


class CheckKind(_Word):
    """What a node's preflight check failed of (core/preflight/verdict.py), root causes first. The check
    program, run in any image on the node, names its kinds as these words (core/preflight/check_program.py)."""

    # the node itself: whatever its peers do, these stand
    SSH = "ssh"
    IMAGE_MISSING = "image_missing"
    PYTHON_MISSING = "python_missing"
    DOCKER = "docker"
    NOT_STARTED = "not_started"  # the check's container did not start within its start window
    INTERFACE_MISSING = "interface_missing"
    ADDRESS_MISSING = "address_missing"
    PORT_IN_USE = "port_in_use"
    # the rendezvous and the collectives
    UNREACHABLE = "unreachable"
    REFUSED = "refused"
    RDMA = "rdma"
    GPU = "gpu"
    NCCL = "nccl"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"
    # found beside the rendezvous, on a node that met its peers
    MEMORY = "memory"  # short of the free memory the engine will ask for
    IPC = "ipc"  # logind would remove the engine's IPC objects (the semaphore trap)
    # what the other ranks see of someone else's failure
    PEER_LATE = "peer_late"
    PEER_MISSING = "peer_missing"
    PEER_FAILED = "peer_failed"
    STOPPED = "stopped"  # stopped after another node failed
    SKIPPED = "skipped"  # not started: another node failed its checks first
