"""The status line at the top: cluster, nodes up, deployment state, endpoint, what is running.

It must fit one line of any width without losing the endpoint: words are shortened, then the
cluster name is cut, never the endpoint or the state.
"""

from __future__ import annotations

from textual.content import Content

from ...core.state.words import operation_doing
from .fmt import ellipsize


def status_line(
    cluster: str,
    up: int,
    total: int,
    state: str,
    state_style: str,
    endpoint: str | None,
    ops: list[str],
    width: int,
    local: str | None = None,
) -> Content:
    """The line for a screen `width` cells wide (two of them are padding). Two URLs serve the same
    engine: `endpoint` as the nodes reach it, `local` through this machine's SSH forward; each is
    labelled, and the forward is left out first when the line is short of room."""
    room = max(20, width - 2)
    doing = ", ".join(operation_doing(o) for o in sorted(ops))
    here = f" · local {local}" if local else ""
    tries = [
        (f" · {up}/{total} nodes up · deployment ", doing, here),
        (f" · {up}/{total} up · ", doing, here),
        (f" · {up}/{total} up · ", f"{len(ops)} running" if ops else "", here),
        (f" · {up}/{total} up · ", "", here),
        (f" · {up}/{total} up · ", "", ""),
    ]
    for middle, busy, fwd in tries:
        tail = [(middle, ""), (state, state_style)]
        if endpoint:
            tail.append((f" · on nodes {endpoint}", ""))
        if fwd:
            tail.append((fwd, ""))
        if busy:
            tail.append((f" · {busy}", ""))
        rest = sum(len(t) for t, _ in tail)
        if len(cluster) + rest <= room or (middle, busy, fwd) == tries[-1]:
            name = ellipsize(cluster, max(4, room - rest))
            # Content, not markup: a cluster name with [brackets] must show as written
            return Content.assemble((name, "bold"), *tail)
    raise AssertionError("unreachable")
