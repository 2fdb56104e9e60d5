"""The suite side by side (`pytest -n N`, as the test command runs it): which tests must share a worker,
and which go first.

A unit is what one worker runs whole: the lab's two halves, and every other module (so a module's
fixtures are built once). Each lab half builds a lab of its own (its subnets are picked free under a
lock). The real engine's stories and the memory guard share one half, since the guard's tests read this
machine's real memory, which an engine loading beside them would move. The halves run longest, so
they start first; the other tiers follow, slower ones first, and the unit tier's many short modules
fill the end.

xdist's own `loadgroup` cannot do this with pytest 9: it marks a group by rewriting `item._nodeid`,
which pytest no longer reads.
"""

from __future__ import annotations

from pathlib import PurePosixPath

LAB_REAL = {"test_real_engine.py", "test_real_engine_faults.py", "test_memory_guard.py"}
FIRST = ("lab-real", "lab", "demo", "tui", "contract", "ssh", "bench", "install")


def unit(nodeid: str) -> str:
    """The unit a test belongs to: `lab-real`, `lab`, or its module's path."""
    module = nodeid.split("::", 1)[0]
    parts = PurePosixPath(module).parts
    if parts[:2] == ("tests", "lab"):
        return "lab-real" if parts[-1] in LAB_REAL else "lab"
    return module


def rank(nodeid: str) -> int:
    """Where a test's unit goes in the queue: by FIRST, then everything else."""
    u = unit(nodeid)
    tier = u if u in ("lab-real", "lab") else (PurePosixPath(u).parts[1:2] or ("",))[0]
    return FIRST.index(tier) if tier in FIRST else len(FIRST)


def scheduler(config, log):
    """xdist's scope scheduler with these units, in the order the workers collected them (sorted by
    rank in tests/conftest.py), not by size."""
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    config.option.loadscopereorder = False
    return Units(config, log)
