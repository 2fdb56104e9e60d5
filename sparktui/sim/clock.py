"""Simulated time: every pause is in "real-ish" engine seconds divided by SPARKTUI_SIM_SPEED.

Durations printed in log lines are engine seconds (what the real engine would have reported);
timestamps are wall-clock, so `docker logs -t` stays coherent.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

SCENARIOS = {
    "sglang-host-ip": "SGLang's message queue ignores SGLANG_HOST_IP and publishes an address on another network",
    "oom": "CUDA out of memory while loading weights",
    "no-ray-cluster": "vLLM does not find the running Ray cluster and starts a local one",
    "slow-load": "weight loading ten times slower, with the unified-memory prefetch warning",
    "collective-timeout": "mid-serving, the all-reduce between the nodes hangs until torch's NCCL watchdog (600 s)",
}


def speed() -> float:
    """SPARKTUI_SIM_SPEED as a positive float (1.0 when unset or invalid)."""
    raw = os.environ.get("SPARKTUI_SIM_SPEED", "").strip()
    try:
        value = float(raw) if raw else 1.0
    except ValueError:
        return 1.0
    return value if value > 0 else 1.0


def scaled(seconds: float) -> float:
    """Wall seconds for `seconds` of engine time."""
    return seconds / speed()


async def pause(seconds: float) -> None:
    """Sleep `seconds` of engine time."""
    await asyncio.sleep(scaled(seconds))


def scenarios() -> frozenset[str]:
    """Active scenarios from SPARKTUI_SIM_SCENARIO (comma list); unknown names are reported once."""
    names = {s.strip().lower() for s in os.environ.get("SPARKTUI_SIM_SCENARIO", "").split(",") if s.strip()}
    unknown = names - SCENARIOS.keys()
    if unknown and not getattr(scenarios, "_warned", False):
        scenarios._warned = True  # type: ignore[attr-defined]
        print(
            f"sparktui-sim: unknown scenario(s) ignored: {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(SCENARIOS))}",
            file=sys.stderr,
            flush=True,
        )
    return frozenset(names & SCENARIOS.keys())


def active(name: str) -> bool:
    return name in scenarios()


class EngineClock:
    """Engine seconds elapsed since creation (wall time multiplied by the speed)."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def elapsed(self) -> float:
        return (time.monotonic() - self._start) * speed()
