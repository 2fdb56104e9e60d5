"""While a deployment is ready: its serving metrics, and whether it is wedged.

Each health tick scrapes the engine's /metrics on the head (metrics_read: over the SSH connection)
into a Serving view and the Liveness judge; when the engine is idle (or exports no metrics) a
one-token completion goes through the endpoint's forward now and then, so a frozen rank shows even
without traffic. `check_wedged` is the same question asked once, for `sparktui status`.
"""

from __future__ import annotations

import asyncio
import time

from ..serving.liveness import LOOK_AT, Liveness
from ..serving.metrics import Serving
from ..remote.ssh import Node
from .metrics_read import MetricsUnavailable, Target, scrape
from .readiness import _call, _json

__all__ = ["LOOK_AT", "ServingWatch", "check_wedged", "probe_timeout"]


def probe_timeout(wedge_after: float) -> float:
    """How long a one-token completion may take before it counts against the engine."""
    return min(30.0, wedge_after / 2)


async def one_token(base: str, model: str | None, timeout: float, api_key: str | None = None) -> bool:
    """Does a one-token completion get an answer within timeout?

    Any HTTP answer counts: a refusal (a wrong key, a bad request) is inconclusive, and calling it
    wedged would be a false alarm; what a wedged engine does is not answer at all."""
    if not model:
        status, data, _, _ = await _call(base + "/v1/models", None, min(timeout, 10.0), api_key)
        ids = [m.get("id") for m in _json(data).get("data", []) if isinstance(m, dict)] if status == 200 else []
        model = str(ids[0]) if ids else ""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "ping"}],
        "max_tokens": 1,
        "temperature": 0,
        "stream": False,
    }
    status, _, _, _ = await _call(base + "/v1/chat/completions", body, timeout, api_key)
    return status is not None


class ServingWatch:
    def __init__(
        self, node: Node, target: Target, model: str | None, api_key: str | None, wedge_after: float, clock=time.time
    ):
        self.node, self.target, self.model, self.api_key = node, target, model, api_key
        self.clock = clock
        self.view = Serving(target.engine, target.version)
        self.live = Liveness(wedge_after)
        self.unavailable: str | None = None  # why there are no metrics (said once)
        self.probe_every = probe_timeout(wedge_after)
        self._probe: asyncio.Task | None = None
        self._probed_at = float("-inf")

    async def tick(self, local: int | None) -> str | None:
        """One scrape (and maybe a probe started in the background); why it is wedged now, or None."""
        now = self.clock()
        try:
            s = await scrape(self.node, self.target)
        except MetricsUnavailable as e:
            self.unavailable = str(e)
        else:
            self.unavailable = None
            self.view.add(s)
            if not s.error:
                self.live.observe(s)
        idle = self.unavailable is not None or not self.live.busy
        if local is not None and idle and self._probe is None and now - self._probed_at >= self.probe_every:
            self._probed_at = now
            self._probe = asyncio.get_running_loop().create_task(self._run_probe(f"http://127.0.0.1:{local}"))
        return self.live.verdict(now)

    async def _run_probe(self, base: str) -> None:
        before, firsts, t0 = self.live.tokens, self.live.firsts, self.clock()
        try:
            ok = await one_token(base, self.model, self.probe_every, self.api_key)
            self.live.probe(ok, self.clock() - t0, before, firsts)
        finally:
            self._probe = None

    def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()


async def check_wedged(
    node: Node, target: Target, base: str, model: str | None, api_key: str | None, wedge_after: float
) -> tuple[str | None, str | None]:
    """Once, for `status`: (why it is wedged: a one-token probe got no answer while no token was generated,
    why its metrics cannot tell: the probe got none and the engine exports no generation-token counter)."""
    live = Liveness(wedge_after)

    async def observe() -> None:
        try:
            s = await scrape(node, target)
        except MetricsUnavailable:
            return
        if not s.error:
            live.observe(s)

    await observe()
    before, firsts = live.tokens, live.firsts
    wait = probe_timeout(wedge_after)
    t0 = time.monotonic()
    ok = await one_token(base, model, wait, api_key)
    await observe()
    live.probe(ok, time.monotonic() - t0, before, firsts)
    return live.probe_failed, live.cannot_tell
