"""A mark on the head that `stop` was asked for, so a launch watched from another terminal says
"stopped" instead of reading the engines' dying words (NCCL peers gone, a process exited) as a failure.

`stop` writes it before removing anything; a launch clears it once it has replaced what ran before,
so a mark found later was written by a stop of this very launch.
"""
from __future__ import annotations

from ..ssh import Node, script
from .record import STATE_DIR


def _path(deployment: str) -> tuple[str, str]:
    return STATE_DIR, f"{deployment}.stopped"


async def mark(node: Node, deployment: str) -> None:
    d, f = _path(deployment)
    await node.run(script('mkdir -p "$HOME"/{d} && date +%s > "$HOME"/{d}/{f}', d=d, f=f), timeout=30)


async def clear(node: Node, deployment: str) -> None:
    d, f = _path(deployment)
    await node.run(script('rm -f "$HOME"/{d}/{f}', d=d, f=f), timeout=30)


async def stopped(node: Node, deployment: str) -> bool:
    """Whether a stop was asked for since this deployment's launch (False when the head cannot say)."""
    d, f = _path(deployment)
    r = await node.run(script('test -f "$HOME"/{d}/{f} && echo stopped || true', d=d, f=f), timeout=30)
    return r.ok and r.stdout.strip() == "stopped"
