"""The rendezvous preflight: prove in well under a minute that every node reaches the head on the plan's
subnet, in the plan's image, before an engine loads ~120 GB and hangs in its distributed init.

- `runner` — `run_preflight`: the check on every node at once, bounded in time, leaving nothing behind
- `remote` — what the check runs on a node: the look before, and the `docker run` of the check program
- `check_program` — the rendezvous check itself, run inside the plan's image on every node
- `verdict` — per-node results and the overall verdict: what failed, where, and what to try
- `halves` — each fabric half's own subnet proven to carry traffic
- `rails` — each RDMA rail on its own: `ib_write_bw` between the two ends of every half in use
- `rate` — the measured bandwidth against what the link could carry, and why it falls short
- `transit` — whether a ring's nodes forward for each other (forwarding, routes, iptables)
- `ipc` — the semaphore trap: will systemd-logind remove the engine's IPC objects at logout
- `leftovers` — what an earlier launch or copy left on a node, and what frees it
"""

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
