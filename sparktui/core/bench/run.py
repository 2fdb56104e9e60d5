"""Run a benchmark on a deployment's head through its SSH connection: start, follow, stop, collect.

The caller's cancellation (Ctrl-C, esc in the TUI) stops the client on the node before it returns, so an
interrupted bench leaves nothing running.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable

from ..state import statefile
from ..config.config import Config
from ..deploy.metrics_read import MetricsUnavailable, Target, http_get, locate, scrape
from ..deploy.options import api_key_of
from ..deploy.record import Record, load_record
from ..remote.ssh import Cluster, Node
from . import client, taint
from .results import Row, from_client

POLL_S = 1.0


class BenchError(Exception):
    """Why no rows came: `reason` for --json, `fix` where there is one."""

    def __init__(self, message: str, reason: str, fix: str | None = None):
        super().__init__(message)
        self.reason, self.fix = reason, fix


@dataclass
class Bench:
    target: Target
    model: str  # the served model name the client asks for
    model_path: str  # the tokenizer: the model's own directory on the head
    image: str
    plan_id: str
    mode: str
    tp: int
    bid: str = field(default_factory=lambda: time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3))
    api_key: str | None = field(default=None, repr=False)  # the endpoint's key, from the deployment's record


async def served_model(node: Node, port: int, api_key: str | None = None) -> str:
    """The model id the engine serves (/v1/models): what the client must name."""
    auth = {"Authorization": f"Bearer {api_key}"} if api_key else None
    try:
        status, body = await http_get(node, port, "/v1/models", headers=auth)
        ids = [m.get("id") for m in json.loads(body).get("data", []) if isinstance(m, dict)]
    except (OSError, TimeoutError, ValueError, AttributeError) as e:
        raise BenchError(
            f"{node.name}:127.0.0.1:{port}/v1/models did not answer ({type(e).__name__}: {e})",
            "not serving",
            "sparktui status shows the deployment's state",
        ) from None
    if status != 200 or not ids or not isinstance(ids[0], str):
        raise BenchError(
            f"{node.name}:127.0.0.1:{port}/v1/models answered HTTP {status} without a model",
            "not serving",
            "sparktui status shows the deployment's state",
        )
    return ids[0]


async def prepare(cluster: Cluster, config: Config, name: str) -> Bench:
    try:
        t = await locate(cluster, config, name)
    except MetricsUnavailable as e:
        raise BenchError(str(e), "not serving", "sparktui status shows the deployment's state") from None
    node = cluster[t.node]
    rec: Record | None
    try:
        rec = await load_record(cluster[config.head.name], name)
    except statefile.StateFileError:
        rec = None  # the figures are kept without the plan's id; launch rewrites the record
    key = api_key_of(rec.options) if rec else None
    model = await served_model(node, t.port, key)
    return Bench(
        api_key=key,
        target=t,
        model=model,
        model_path=(rec.options.model_path if rec and getattr(rec.options, "model_path", None) else config.model.path),
        image=rec.image if rec else "",
        plan_id=rec.plan_id if rec else "",
        mode=rec.mode if rec else "",
        tp=rec.tp if rec else 0,
    )


async def run(
    cluster: Cluster,
    config: Config,
    b: Bench,
    w: client.Workload,
    on_progress: Callable[[client.Progress], None] = lambda p: None,
) -> list[Row]:
    node = cluster[b.target.node]
    image = config.image_for(client.CLIENT_ENGINE.name)
    r = await node.run(client.find_client(image), timeout=120)  # `vllm bench serve --help` imports vLLM
    where = r.stdout.strip()
    if where not in ("path", "image"):
        raise BenchError(
            client.missing_message(node.name, image), "client missing", client.missing_fix(node.name, image)
        )
    before = taint.Seen(b.target, b.plan_id, await _scrape(node, b.target))
    text = client.job(where, b.bid, image, b.target.port, b.model, b.model_path, w)
    r = await node.run(client.start(b.bid, text, key_on_stdin=bool(b.api_key)), timeout=30, input=b.api_key or None)
    if not r.ok:
        raise BenchError(f"the client did not start on {node.name}: {r.stderr.strip()[:300]}", "start failed")
    started = time.time()
    try:
        # the watchdog stops the client if sparktui ends with no chance to (kill -9, a lost link)
        async with node.held(client.watchdog(b.bid)):
            rc, tail = await _follow(node, b.bid, on_progress)
    except BaseException:  # cancelled (Ctrl-C, esc) or the link broke: the client must not stay behind
        await asyncio.shield(node.run(client.stop(b.bid), timeout=20))
        raise
    if rc != 0 and client.lacks_bench(tail):
        raise BenchError(
            client.image_lacks_message(node.name, image), "client missing", client.image_lacks_fix(node.name)
        )
    if rc != 0:
        raise BenchError(f"the client exited {rc} on {node.name}: {client.failure_words(tail)}", "client failed")
    r = await node.run(client.read_results(b.bid, w.concurrency), timeout=30)
    files = client.split_results(r.stdout)
    rows = []
    for c in w.concurrency:
        where = f"{node.name}:~/{client.STATE_ROOT}/{b.bid}/c{c}.json"
        if c not in files:
            raise BenchError(f"{where}: the client left no result", "no result")
        try:
            rows.append(
                from_client(
                    files[c],
                    where,
                    concurrency=c,
                    deployment=b.target.deployment,
                    engine=b.target.engine,
                    image=b.image,
                    plan_id=b.plan_id,
                    mode=b.mode,
                    tp=b.tp,
                    input_len=w.input_len,
                    output_len=w.output_len,
                    started=started,
                )
            )
        except statefile.StateFileError as e:
            raise BenchError(e.line(), "unreadable result") from None
    why = taint.reasons(
        before,
        await _seen(cluster, config, b.target.deployment),
        sent=sum(w.num_prompts(c) for c in w.concurrency),
        runs=len(w.concurrency),
        completed=sum(r.completed for r in rows),
        failed=sum(r.failed for r in rows),
    )
    for r in rows:
        r.tainted = why
    return rows


async def _scrape(node: Node, t: Target):
    try:
        return await scrape(node, t)
    except MetricsUnavailable:
        return None


async def _seen(cluster: Cluster, config: Config, name: str) -> taint.Seen:
    """The deployment after the run: what serves, its plan, its counters."""
    try:
        t = await locate(cluster, config, name)
    except MetricsUnavailable as e:
        return taint.Seen(None, "", None, str(e))
    try:
        rec = await load_record(cluster[config.head.name], name)
    except statefile.StateFileError:
        rec = None
    return taint.Seen(t, rec.plan_id if rec else "", await _scrape(cluster[t.node], t))


async def run_on_deployment(
    cluster: Cluster,
    config: Config,
    name: str,
    w: client.Workload,
    on_progress: Callable[[client.Progress], None] = lambda p: None,
) -> list[Row]:
    """prepare + run, and the rows kept in the local history."""
    from .results import append

    rows = await run(cluster, config, await prepare(cluster, config, name), w, on_progress)
    append(rows)
    return rows


async def _follow(node: Node, bid: str, on_progress: Callable[[client.Progress], None]) -> tuple[int, str]:
    """Poll the job until its rc appears; a job gone without rc is a failure (exit 255)."""
    while True:
        r = await node.run(client.poll(bid), timeout=30)
        head, _, tail = r.stdout.partition("\n")
        if r.ok and head.startswith("rc="):
            fields = dict(kv.split("=", 1) for kv in head.split() if "=" in kv)
            on_progress(client.progress(tail))
            if fields.get("rc", "").strip().isdigit():
                return int(fields["rc"]), tail
            if fields.get("alive") == "0":
                await asyncio.sleep(POLL_S)  # rc is written just after the process ends
                r2 = await node.run(client.poll(bid), timeout=30)
                h2 = r2.stdout.partition("\n")[0]
                rc = dict(kv.split("=", 1) for kv in h2.split() if "=" in kv).get("rc", "")
                return (int(rc) if rc.isdigit() else 255), tail
        await asyncio.sleep(POLL_S)
