"""Deploy: run a plan on the nodes, follow the engines, prove the endpoint, stop/pivot/redeploy/reattach.

orchestrator.py  Deployer, the plain async object the CLI and the TUI drive
options.py       what a pivot or redeploy relaunches, and the default planner
logstream.py     docker logs -f -t per container, resumed with --since and deduplicated
readiness.py     /health, /v1/models and one chat completion through an SSH forward
watchdog.py      ticks the Diagnoser so silence past its phase's limit is flagged
memwatch.py      the unified-memory guard on every node, from the first container until stopped
containers.py    this deployment's containers, found and removed by label only
record.py        a Deployment's JSON form, kept on the head for pivot/redeploy from a new process
lock.py          the deployment's lock on the head: one launch, pivot, redeploy or stop at a time
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
