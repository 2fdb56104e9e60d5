"""Whether a bench run measured the deployment alone: a run is tainted when other clients' requests reached
the engine during it, when requests failed, or when the deployment changed under it (a pivot, a restart).
A tainted run is kept with its reason and never set beside a clean one.

Other traffic is read from the engine's own /metrics: its TTFT histogram counts every request it served,
so the count's growth over the run, less what the client sent, is someone else's. vllm bench serve sends
one test prompt before each run (serve.py's initial single prompt test): one a concurrency is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..deploy.metrics_read import Target
from ..serving.metrics import Scrape


@dataclass
class Seen:
    """The deployment as the bench saw it at one moment; `scrape` None when /metrics did not answer."""

    target: Target | None
    plan_id: str
    scrape: Scrape | None
    why_not: str = ""  # why target or scrape is missing


def served(s: Scrape | None) -> float | None:
    """Requests the engine has served since it started (its TTFT histogram's count), when it says."""
    buckets = (s.buckets.get("ttft") if s else None) or []
    return buckets[-1][1] if buckets else None


def _changed(a: Seen, b: Seen) -> str:
    if b.target is None:
        return f"deployment changed during the run ({b.why_not or 'not serving after it'})"
    ta, tb = a.target, b.target
    if ta is not None and (ta.engine, ta.node, ta.port) != (tb.engine, tb.node, tb.port):
        return f"deployment changed during the run ({ta.engine} on {ta.node}:{ta.port} → {tb.engine} on {tb.node}:{tb.port})"
    if a.plan_id != b.plan_id:
        return f"deployment changed during the run (plan {a.plan_id or '?'} → {b.plan_id or '?'})"
    return ""


def reasons(before: Seen, after: Seen, sent: int, runs: int, completed: int, failed: int) -> str:
    """Why the run is tainted, in words ("" when it is clean). sent: requests the client sent; runs: client
    runs (one per concurrency)."""
    out = []
    if failed:
        out.append(f"failed requests: {failed} of {completed + failed}")
    changed = _changed(before, after)
    if changed:
        out.append(changed)
    n0, n1 = served(before.scrape), served(after.scrape)
    if not changed and n0 is not None and n1 is not None:
        if n1 < n0:
            out.append("deployment changed during the run (the engine restarted: its counters went back)")
        elif n1 - n0 > sent + runs:
            out.append(f"other traffic: the engine served {int(n1 - n0 - sent)} requests besides the bench's")
    return "; ".join(out)
