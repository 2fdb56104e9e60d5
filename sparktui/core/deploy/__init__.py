"""Deploy: run a plan on the nodes, follow the engines, prove the endpoint, stop/pivot/redeploy/reattach.

`Deployer` is the plain async object the CLI and the TUI drive, through `Operations`; the modules
beside it each hold one part of following a launch.

- `orchestrator` — `Deployer`: launch, stop, pivot, redeploy, reattach, told as events
- `operations` — every deploy operation prepared as one object and then run: what the fronts call
- `options` — what a pivot or redeploy relaunches, and the default planner
- `logstream` — `docker logs -f -t` per container, resumed with --since and deduplicated
- `watchdog` — ticks the Diagnoser so silence past its phase's limit is flagged
- `readiness` — /health, /v1/models and one chat completion through an SSH forward
- `health` — a light /health poll of a ready endpoint
- `serving` — while ready: the serving metrics, and the wedge check (`check_wedged`)
- `metrics_read` — a deployment's /metrics read through the head node's SSH connection
- `memwatch` — the unified-memory guard on every node, from the first container until stopped
- `containers` — this deployment's containers, found and removed by label only
- `record` — a Deployment's JSON form, kept on the head for pivot/redeploy from a new process
- `lock` — the deployment's lock on the head: one launch, pivot, redeploy or stop at a time
- `stopmark` — a mark on the head that `stop` was asked, so a watched launch says "stopped"
"""

from __future__ import annotations

from .containers import Found, find_all, summarize
from .logstream import LogBatch, LogFollower, LogLine, split_ts
from .options import Planner, inventory_planner, options_of, other_engine, pivot_options, read_model_config
from ..state.deployment import Deployment
from .orchestrator import DeployError, Deployer, DeploymentExists
from .readiness import Check, check_endpoint
from .record import Record, load_record, save_record

__all__ = [
    "Check",
    "DeployError",
    "Deployer",
    "Deployment",
    "DeploymentExists",
    "Found",
    "LogBatch",
    "LogFollower",
    "LogLine",
    "Planner",
    "Record",
    "check_endpoint",
    "find_all",
    "inventory_planner",
    "load_record",
    "options_of",
    "other_engine",
    "pivot_options",
    "read_model_config",
    "save_record",
    "split_ts",
    "summarize",
]
