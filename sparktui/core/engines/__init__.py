"""The registry of engines sparktui can launch; each module's `ENGINE` (base.Engine) holds what is its own.

A new engine: one module under core/engines/ with an Engine subclass, and one line below (or `register()`).

- `base` — `Engine`: what an engine module provides (identity, launch, flags, logs, metrics, fit, recipes)
- `common` — what every engine's commands share: words, `docker_run`, per-node env, steps
- `sglang` — SGLang multi-node: the same server command on every rank with its own --node-rank
- `vllm` — vLLM multi-node, with Ray or natively: its `docker run` lines (`steps_ray`, `steps_native`)
- `trtllm` — TensorRT-LLM multi-node: OpenMPI over SSH between the nodes, `trtllm-serve` on every rank
- `cpubuild` — CPU builds of an engine (upstream vLLM built for CPUs)
- `versions` — release numbers read and compared, for the release gates in each engine's module
- `logsigns` — what log lines mean: progress milestones and the engine-neutral failure signs
- `logrules` — one engine's log reading, its own lines and the shared signs put together once
- `metricnames` — which Prometheus series carry what the serving view shows, per release
"""

from __future__ import annotations

from .base import Engine
from . import sglang, trtllm, vllm

# In order: the first is the default engine, and pivot goes to the next one.
ENGINES: dict[str, Engine] = {
    e.name: e
    for e in (
        sglang.ENGINE,
        vllm.ENGINE,
        trtllm.ENGINE,
    )
}
DEFAULT_ENGINE = next(iter(ENGINES))


def register(engine: Engine) -> Engine:
    """Add an engine after the others; its log rules are put together now, not on the first line of a log."""
    if engine.name in ENGINES:
        raise ValueError(f"engine {engine.name!r} is registered already")
    engine.log_rules  # built here, so reading lines never pays for it
    ENGINES[engine.name] = engine
    return engine


def unregister(name: str) -> Engine:
    """Take an engine out of the registry; KeyError for an unknown one."""
    return ENGINES.pop(name)


for _e in ENGINES.values():
    _e.log_rules  # as register() does
del _e


def get_engine(name: str) -> Engine:
    """The engine by name; KeyError lists the known ones."""
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r} (expected one of: {', '.join(ENGINES)})") from None


def find_engine(name: str | None) -> Engine | None:
    """The engine by name, None for an unknown one (a log, a record or a container from elsewhere)."""
    return ENGINES.get(name or "")


def default_mode(engine: str) -> str:
    return get_engine(engine).modes[0]


def runs_ray(engine: str, mode: str | None) -> bool:
    """Does this engine's mode start a Ray cluster first (Ray's GCS port is the rendezvous, only the head inits)?"""
    e = ENGINES.get(engine)
    return e is not None and mode is not None and e.shape(mode) == "ray-driver"


def uses_dist_port(engine: str, mode: str | None) -> bool:
    """Does this mode's launch dial a torch rendezvous (--dist-port)? Only the `ranks` shape: Ray's driver joins
    through Ray's GCS, and an MPI launcher starts its ranks over SSH (TensorRT-LLM: the containers' sshd port)."""
    e = ENGINES.get(engine)
    return e is None or mode is None or e.shape(mode) == "ranks"


def next_engine(engine: str) -> str:
    """Where pivot goes without being told: the next engine of the registry's pivot cycle (with two, the other
    one); an engine outside the cycle pivots back to the cycle's first."""
    names = [n for n, e in ENGINES.items() if e.in_pivot_cycle] or list(ENGINES)
    return names[(names.index(engine) + 1) % len(names)] if engine in names else names[0]


def label(engine: str) -> str:
    """The engine's name as people write it ("vLLM"); an unknown one as given."""
    e = ENGINES.get(engine)
    return e.label if e else engine


def host_ip_vars() -> tuple[str, ...]:
    """Every engine's variable that pins its sockets to a node's fabric address, in registry order, once each."""
    return tuple(dict.fromkeys(e.host_ip_env for e in ENGINES.values() if e.host_ip_env))
