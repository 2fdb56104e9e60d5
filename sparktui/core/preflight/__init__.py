"""The rendezvous preflight: prove in well under a minute that every node reaches the head on the plan's
subnet, in the plan's image, before an engine loads ~120 GB and hangs in its distributed init."""

from .runner import DEFAULT_START_WINDOW, DEFAULT_TIMEOUT, PreflightError, checkable, run_preflight
from .verdict import NodeResult, Setting, Verdict, explain, judge_memory

__all__ = [
    "DEFAULT_START_WINDOW",
    "DEFAULT_TIMEOUT",
    "NodeResult",
    "PreflightError",
    "Setting",
    "Verdict",
    "checkable",
    "explain",
    "judge_memory",
    "run_preflight",
]
