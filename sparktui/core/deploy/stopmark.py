"""A mark on the head that `stop` was asked for, so a launch watched from another terminal says
"stopped" instead of reading the engines' dying words (NCCL peers gone, a process exited) as a failure.

`stop` writes it before removing anything; a launch clears it once it has replaced what ran before,
so a mark found later was written by a stop of this very launch.

The memory guard leaves a mark of its own, with its reason: its stop removes every container, so without
it `sparktui status` from another terminal would show no deployment and not say what happened. A launch or
a `stop` clears it.
"""

from __future__ import annotations

from ..remote.ssh import Node, script
from .record import STATE_DIR


def _path(deployment: str) -> tuple[str, str]:
    return STATE_DIR, f"{deployment}.stopped"


GUARDED = ".guarded"
REASON_MAX = 2000  # characters of a guard's reason read back; the file is ours, but a node's disk is not


async def mark(node: Node, deployment: str) -> None:
    d, f = _path(deployment)
    await node.run(
        script(
            'mkdir -p "$HOME"/{d} && date +%s > "$HOME"/{d}/{f} && rm -f "$HOME"/{d}/{g}',
            d=d,
            f=f,
            g=deployment + GUARDED,
        ),
        timeout=30,
    )


async def clear(node: Node, deployment: str) -> None:
    d, f = _path(deployment)
    await node.run(script('rm -f "$HOME"/{d}/{f} "$HOME"/{d}/{g}', d=d, f=f, g=deployment + GUARDED), timeout=30)


async def mark_guarded(node: Node, deployment: str, reason: str) -> None:
    """The memory guard stopped this deployment, and why (one line)."""
    line = " ".join(reason.split())[:REASON_MAX]
    await node.run(
        script(
            'mkdir -p "$HOME"/{d} && printf "%s\\n" {r} > "$HOME"/{d}/{g}', d=STATE_DIR, r=line, g=deployment + GUARDED
        ),
        timeout=30,
    )


async def guarded(node: Node) -> list[dict]:
    """Deployments the memory guard stopped since their last launch or stop: name, when (epoch s), reason."""
    r = await node.run(
        script(
            'for f in "$HOME"/{d}/*{g}; do [ -f "$f" ] || continue; '
            'printf "@@ %s %s\\n" "$(date -r "$f" +%s 2>/dev/null || echo 0)" "${{f##*/}}"; '
            'head -c {n} "$f"; echo; done',
            d=STATE_DIR,
            g=GUARDED,
            n=REASON_MAX,
        ),
        timeout=30,
    )
    out: list[dict] = []
    if not r.ok:
        return out
    for line in r.stdout.splitlines():
        if line.startswith("@@ "):
            at, _, name = line[3:].partition(" ")
            if name.endswith(GUARDED):
                out.append({"name": name[: -len(GUARDED)], "at": float(at) if at.isdigit() else None, "reason": ""})
        elif out and line.strip() and not out[-1]["reason"]:
            out[-1]["reason"] = line.strip()
    return out


async def stopped(node: Node, deployment: str) -> bool:
    """Whether a stop was asked for since this deployment's launch (False when the head cannot say)."""
    d, f = _path(deployment)
    r = await node.run(script('test -f "$HOME"/{d}/{f} && echo stopped || true', d=d, f=f), timeout=30)
    return r.ok and r.stdout.strip() == "stopped"
