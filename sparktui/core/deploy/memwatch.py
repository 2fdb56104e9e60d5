"""The unified-memory guard during a launch: every node read every `memory.interval` seconds, from just
before the first container starts until the deployment is stopped or closed (loading and serving too).

Each reading goes on the bus as a NodeMemory. A warning is a provisional problem (once per node until it
recovers); a stop, with the guard on, removes this deployment's containers on every node before the host
wedges, and leaves it failed with the reason. A reading that fails never stops anything.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ..diagnosis.diagnose import Problem, ProblemCleared
from ..engines import find_engine
from ..state.events import NodeMemory
from ..memory.guard import Guard, Verdict, advice
from ..memory.reader import MEMINFO, PRESSURE, MemReader
from ..memory.sample import MemSample
from ..state.states import ProblemKind as PK
from ..state.words import problem_words

if TYPE_CHECKING:
    from .orchestrator import Deployer

MemFiles = tuple[str, str]  # (meminfo, pressure) paths on the nodes; tests point them at their own files
DEFAULT_FILES: MemFiles = (MEMINFO, PRESSURE)


def hint_for(d: "Deployer", s: MemSample) -> str:
    """The guard's advice with this launch's numbers: its engine's flags, fraction and context length."""
    cur = d.current
    eng = find_engine(cur.engine)
    opts = cur.options
    plan = d.plan if d.plan is not None and d.plan.plan_id == cur.plan_id else None
    fraction = plan.mem_fraction if plan is not None else None
    if fraction is None and opts is not None:
        fraction = opts.mem_fraction
    vocab = eng.vocabulary if eng is not None else {}
    return advice(
        s,
        d.config.memory,
        fraction=fraction,
        fraction_flag=vocab.get("mem_fraction"),
        kv_flag=eng.kv_cache_bytes_flag if eng is not None else None,
        len_flag=vocab.get("context_length"),
        max_len=opts.max_model_len if opts is not None else None,
        expandable=plan is not None and plan.expandable,
    )


async def watch_memory(d: "Deployer", nodes: list[str], files: dict[str, MemFiles] | None = None) -> None:
    """Sample `nodes` until cancelled, or until the guard stopped the deployment; `files`: node -> the paths
    it is read from (others: /proc)."""
    cfg = d.config.memory
    guard = Guard(cfg)
    readers = [MemReader(d.cluster[n], *(files or {}).get(n, DEFAULT_FILES)) for n in nodes]
    low: dict[str, Problem] = {}  # node -> its standing memory_low warning
    try:
        while True:
            samples = await asyncio.gather(*(r.sample() for r in readers))
            for s in samples:
                v = guard.judge(s)
                d.memory[s.node] = ev = NodeMemory(d.name, s, v.level, v.detail)
                d._emit(ev)
                if v.level == "stop":
                    await _stop(d, s, v)
                    return
                _warn_or_clear(d, s, v, low)
            await asyncio.sleep(cfg.interval)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.gather(*(r.close() for r in readers), return_exceptions=True))


def _warn_or_clear(d: "Deployer", s: MemSample, v: Verdict, low: dict[str, Problem]) -> None:
    if v.level == "warn" and s.node not in low:
        p = Problem(v.kind or PK.MEMORY_LOW, 0, v.detail, hint_for(d, s), s.node, s.at, provisional=True)
        low[s.node] = p
        d.own_problems.append(p)
        d._emit(p)
    elif v.level == "ok" and s.node in low:
        p = low.pop(s.node)
        if p in d.own_problems:
            d.own_problems.remove(p)
        d._emit(ProblemCleared(p, f"{s.node} has memory to spare again"))


async def _stop(d: "Deployer", s: MemSample, v: Verdict) -> None:
    d._problem(v.kind, s.node, v.detail, hint_for(d, s))
    await d.stop_for(f"{problem_words(v.kind)} on {s.node}: {v.detail}")
