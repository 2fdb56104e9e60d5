"""The first-run screen's cells and lines, as pure functions of what the core found."""

from __future__ import annotations

from rich.text import Text

from ...core.nodes.facts import NodeFacts
from ...core.config.firstrun import NodeDraft, SshTest


def ssh_cell(test: SshTest | None, rejected: bool = False) -> Text:
    if test is None:
        return Text("untested", style="dim")
    if test.ok:
        return Text("✓ ok", style="green")
    if test.unknown_key is not None:
        return Text("✗ key rejected" if rejected else "? unknown key", style="yellow")
    return Text("✗ failed", style="red")


def found_cell(facts: NodeFacts | None) -> str:
    """GPU and memory as the probe saw them: `1× NVIDIA GB10 · 119 GiB`."""
    if facts is None:
        return ""
    if not facts.reachable:
        return "not probed"
    gpu = f"{facts.gpu.count}× {facts.gpu.name}" if facts.gpu.count else "no GPU"
    mem = facts.usable_gpu_memory()
    return gpu + (f" · {mem / 2**30:.0f} GiB" if mem else "")


def row(draft: NodeDraft, test: SshTest | None, facts: NodeFacts | None, rejected: bool = False) -> tuple:
    host = draft.host + (f":{draft.port}" if draft.port else "")
    return (
        draft.name,
        host,
        draft.user or "",
        draft.identity_file or "agent",
        ssh_cell(test, rejected),
        found_cell(facts),
    )


def problems(tests: dict[str, SshTest], rejected: set[str]) -> list[str]:
    """One line per node that failed, with the reason the core gave."""
    out = []
    for name, t in tests.items():
        if t.ok:
            continue
        if t.unknown_key is not None:
            k = t.unknown_key
            verb = "rejected" if name in rejected else "unknown"
            out.append(f"{name}: host key {verb} ({k.algorithm} {k.fingerprint}); ctrl+t asks again")
        else:
            out.append(t.error or f"{name}: SSH failed")
    return out
