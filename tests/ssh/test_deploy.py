"""Deployer against in-process nodes whose `docker` is a recording stand-in (test_deploy_fakes.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from sparktui.core.deploy import DeployError, Deployer, DeploymentExists, load_record
from sparktui.core.state.events import DeploymentChanged, EndpointChecked, EndpointHealth, EventBus, LaunchStep
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Cluster

from .test_deploy_fakes import FABRIC, Recorder, fake_cluster, plan_for, planner_for  # noqa: F401 (fixture)


def runs(fc) -> list[tuple[str, str]]:
    """(node, container name) of every `docker run`, in the order the nodes saw them."""
    return [(node, argv[argv.index("--name") + 1]) for node, argv in fc.calls() if argv[0] == "run"]


def labels_of(fc, node: str, name: str) -> dict:
    return fc[node].meta(name)["labels"]


async def test_sglang_starts_the_worker_first_and_the_head_last_with_labels(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    assert plan.ok, plan.errors
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus)
        try:
            await d.launch(plan)
            started = runs(fc)
            assert [n for n, _ in started] == ["n2", "n1"]
            head = labels_of(fc, "n1", started[-1][1])
            worker = labels_of(fc, "n2", started[0][1])
            assert (head["sparktui.rank"], head["sparktui.role"]) == ("0", "head")
            assert (worker["sparktui.rank"], worker["sparktui.role"]) == ("1", "worker")
            assert head["sparktui.deployment"] == worker["sparktui.deployment"] == "lab"
            assert head["sparktui.plan"] == worker["sparktui.plan"] != ""
            done = [(e.index, e.node) for e in rec.of(LaunchStep) if e.state == "done"]
            assert done == [(0, "n2"), (1, "n1")]
            assert rec.of(DeploymentChanged)[0].state == "starting"
            # the record on the head lets another process pivot or redeploy
            saved = await load_record(cluster["n1"], "lab")
            assert saved is not None and saved.engine == "sglang" and saved.tp == 2 and saved.subnet == FABRIC
        finally:
            await d.close()


async def test_vllm_ray_runs_head_then_worker_then_waits_for_ray_then_serves(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    assert plan.ok, plan.errors
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus(), wait_interval=0.1)
        try:
            await d.launch(plan)
        finally:
            await d.close()
    seq = [(node, argv[0], argv[1] if len(argv) > 1 else "") for node, argv in fc.calls() if argv[0] in ("run", "exec")]
    assert seq[0][:2] == ("n1", "run") and seq[1][:2] == ("n2", "run")
    ray_status = [i for i, (n, c, a) in enumerate(seq) if c == "exec" and a != "-d"]
    serve = [i for i, (n, c, a) in enumerate(seq) if c == "exec" and a == "-d"]
    assert ray_status and serve == [len(seq) - 1] and max(ray_status) < serve[0]
    exec_argv = [argv for _, argv in fc.calls() if argv[:2] == ["exec", "-d"]][0]
    assert f"RAY_ADDRESS={plan.head_ip}:{plan.ray_port}" in exec_argv


async def test_a_wait_that_never_comes_true_fails_the_launch_naming_the_step(fake_cluster):
    fc = await fake_cluster(2, ray_nodes=1)  # `ray status` keeps listing one node of two
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    for s in plan.steps:
        if s.kind == "wait":
            s.timeout = 0.8
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, wait_interval=0.1)
        try:
            await d.launch(plan)
            assert d.current.state == "failed"
            failed = [e for e in rec.of(LaunchStep) if e.state == "failed"]
            assert [e.kind for e in failed] == ["wait"] and "gave up" in failed[0].detail
            assert "ray status" in d.current.detail and "step 3/5" in d.current.detail
        finally:
            await d.close()
    assert not [a for _, a in fc.calls() if a[:2] == ["exec", "-d"]], "serve must not start after a failed wait"


async def test_refuses_a_plan_with_errors_before_touching_a_node(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="sglang", tp=3))
    assert not plan.ok
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus())
        with pytest.raises(DeployError, match="TP x PP"):
            await d.launch(plan)
    assert fc.calls() == []


async def test_stop_removes_only_containers_carrying_this_deployments_label(fake_cluster):
    fc = await fake_cluster(2)
    fc["n1"].add_container("user-db", {})
    fc["n1"].add_container("sparktui-other-sglang-0", {"sparktui.deployment": "other"})
    fc["n2"].add_container("lab-lookalike", {"sparktui.deployment.x": "lab"})
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, stop_grace=1)
        await d.launch(plan)
        ours = {n: [c for c in fc[n].names() if c.startswith("sparktui-lab-")] for n in ("n1", "n2")}
        assert all(len(v) == 1 for v in ours.values())
        removed = await d.stop()
    assert removed == 2
    assert fc["n1"].names() == ["sparktui-other-sglang-0", "user-db"]
    assert fc["n2"].names() == ["lab-lookalike"]
    assert [e.state for e in rec.of(DeploymentChanged)][-2:] == ["stopping", "stopped"]


async def test_a_second_launch_of_the_same_plan_resumes_without_starting_anything_twice(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    async with Cluster(fc.config) as cluster:
        first = Deployer(cluster, fc.config, EventBus(), wait_interval=0.1)
        await first.launch(plan)
        await first.close()
    # a new process (new connections, new Deployer) launches the same plan again
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        again = Deployer(cluster, fc.config, bus, wait_interval=0.1)
        try:
            await again.launch(plan_for(fc.config, PlanOptions(engine="vllm", mode="ray")))
            skipped = [(e.node, e.kind) for e in rec.of(LaunchStep) if e.state == "skipped"]
        finally:
            await again.close()
    assert len(runs(fc)) == 2
    assert len([a for _, a in fc.calls() if a[:2] == ["exec", "-d"]]) == 1
    assert skipped == [("n1", "run"), ("n2", "run"), ("n1", "exec")]


async def test_a_launch_resumes_a_half_started_plan_running_only_what_is_missing(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    worker = plan.steps[0]
    async with Cluster(fc.config) as cluster:
        # as if an earlier process was killed right after starting the worker
        assert (await cluster[worker.node].run(worker.command)).ok
        d = Deployer(cluster, fc.config, EventBus())
        try:
            await d.launch(plan)
        finally:
            await d.close()
    assert [n for n, _ in runs(fc)] == ["n2", "n1"]  # the worker once, then the head


async def test_another_plan_running_is_not_replaced_unless_asked(fake_cluster):
    fc = await fake_cluster(2)
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus(), wait_interval=0.1, stop_grace=1)
        try:
            await d.launch(plan_for(fc.config, PlanOptions(engine="sglang")))
            vllm = plan_for(fc.config, PlanOptions(engine="vllm"))
            with pytest.raises(DeploymentExists) as exc:
                await d.launch(vllm)
            assert sorted(line.split(":")[0] for line in exc.value.lines()) == ["n1", "n2"]
            assert all("sglang" in line for line in exc.value.lines())
            assert not [c for c in fc["n1"].names() if "vllm" in c]
            await d.launch(vllm, if_exists="replace")
            assert [c for c in fc["n1"].names() if c.startswith("sparktui-lab")] == ["sparktui-lab-vllm-0"]
            assert fc["n2"].names() == ["sparktui-lab-vllm-1"]
        finally:
            await d.close()


async def test_leftover_exited_containers_of_this_deployment_are_cleared_before_a_launch(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    fc["n1"].add_container(
        plan.nodes[0].container, {"sparktui.deployment": "lab", "sparktui.plan": "old"}, state="exited"
    )
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus(), stop_grace=1)
        try:
            await d.launch(plan)
        finally:
            await d.close()
    assert fc["n1"].meta(plan.nodes[0].container)["labels"]["sparktui.plan"] == plan.plan_id


async def test_pivot_from_a_new_process_keeps_model_tp_and_network(fake_cluster):
    fc = await fake_cluster(2)
    opts = PlanOptions(
        engine="sglang", extra_args=["--disable-cuda-graph", "--disable-radix-cache"], env={"HF_TOKEN": "hf_kept_0001"}
    )
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus())
        first = plan_for(fc.config, opts)
        await d.launch(first, opts)
        await d.close()
    seen: list[PlanOptions] = []
    planner = planner_for(fc.config)

    async def recording(o: PlanOptions):
        seen.append(o)
        return await planner(o)

    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, planner=recording, wait_interval=0.1, stop_grace=1)
        try:
            plan = await d.pivot()
            saved = await load_record(cluster["n1"], "lab")
        finally:
            await d.close()
    assert (plan.engine, plan.mode) == ("vllm", "ray")
    assert (plan.tp, plan.pp, plan.subnet, plan.model_path) == (first.tp, first.pp, first.subnet, first.model_path)
    assert seen[0].rendezvous == FABRIC and seen[0].tp == first.tp  # pinned, not re-guessed
    # the record carried the token to this process; SGLang-only flags are named, not passed to vLLM
    assert seen[0].extra_args == ["--enforce-eager"] and seen[0].env == {"HF_TOKEN": "hf_kept_0001"}
    assert plan.warnings[0] == "not carried over to vLLM (no equivalent): --disable-radix-cache"
    assert fc["n1"].names() == ["sparktui-lab-vllm-0"] and fc["n2"].names() == ["sparktui-lab-vllm-1"]
    assert saved is not None and saved.engine == "vllm" and saved.subnet == FABRIC
    states = [e.state for e in rec.of(DeploymentChanged)]
    assert states.index("stopped") < states.index("starting")


async def test_pivot_with_a_bad_new_plan_stops_nothing(fake_cluster):
    fc = await fake_cluster(2)
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus(), planner=planner_for(fc.config))
        try:
            await d.launch(plan_for(fc.config, PlanOptions(engine="sglang")))
            fc.config.images.vllm = "missing/image:1"  # not on the nodes: the new plan has an error
            with pytest.raises(DeployError, match="not there"):
                await d.pivot("vllm")
        finally:
            await d.close()
    assert fc["n1"].names() == ["sparktui-lab-sglang-0"]


async def test_redeploy_without_any_record_says_launch_first(fake_cluster):
    fc = await fake_cluster(1)
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus(), planner=planner_for(fc.config))
        with pytest.raises(DeployError, match="launch it first"):
            await d.redeploy()


async def test_reattach_rebuilds_engine_and_head_from_labels(fake_cluster):
    fc = await fake_cluster(2)
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus(), wait_interval=0.1)
        await d.launch(plan_for(fc.config, PlanOptions(engine="vllm", mode="ray", port=8123)))
        await d.close()
    fc["n1"].write_log("sparktui-lab-vllm-0", "INFO 01-01 00:00:00 [api_server.py:1] Starting vLLM API server")
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus)
        try:
            assert await d.reattach()
            assert (d.current.engine, d.current.mode, d.current.head, d.current.port) == ("vllm", "ray", "n1", 8123)
            await rec.wait_for(
                lambda e: (
                    getattr(e, "source", None) == "sparktui-lab-vllm-0"
                    and any("Starting vLLM API server" in ln for ln in e.lines)
                )
            )
        finally:
            await d.close()
    assert len(runs(fc)) == 2  # reattaching starts nothing


class _Api:
    """A minimal OpenAI-style server: /health answers 503 `warmup` times, then 200."""

    def __init__(self, warmup: int, model: str):
        self.warmup = warmup
        self.model = model
        self.health_calls = 0
        self.server: asyncio.base_events.Server | None = None

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = await r.readuntil(b"\r\n\r\n")
        first = head.split(b"\r\n")[0].decode()
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = await r.readexactly(length) if length else b""
        path = first.split()[1]
        if path == "/health":
            self.health_calls += 1
            code, doc = (503, {}) if self.health_calls <= self.warmup else (200, {})
        elif path == "/v1/models":
            code, doc = 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        else:
            req = json.loads(body)
            code, doc = (
                200,
                {
                    "choices": [{"message": {"role": "assistant", "content": f"ready ({req['model']})"}}],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 7},
                },
            )
        data = json.dumps(doc).encode()
        w.write(
            f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n".encode()
            + data
        )
        await w.drain()
        w.close()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]


async def test_ready_only_after_health_models_and_a_chat_answer_through_the_forward(fake_cluster):
    api = _Api(warmup=3, model="tiny")
    port = await api.start()
    fc = await fake_cluster(2)
    for n in fc.nodes:  # the stand-in nodes forward to their loopback, where the engine's port is here
        n.server.forwarding = True
    plan = plan_for(fc.config, PlanOptions(engine="sglang", port=port))
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, poll_interval=0.05)
        try:
            await d.launch(plan)
            assert await d.wait(15) == "ready"
            snap = d.current  # the one place the Deployer keeps where it stands
        finally:
            await d.close()
            api.server.close()
    assert api.health_calls == 4  # three 503s, then the one that let the check go on
    chk = rec.of(EndpointChecked)[0]
    assert chk.model == "tiny" and chk.completion_tokens == 7 and chk.reply == "ready (tiny)"
    assert chk.tokens_per_s == pytest.approx(7 / chk.latency_s)
    assert chk.endpoint == f"http://127.0.0.1:{port}/v1" and chk.local.startswith("http://127.0.0.1:")
    ready = [e for e in rec.of(DeploymentChanged) if e.state == "ready"]
    assert ready and ready[0].endpoint == chk.endpoint
    assert (snap.state, snap.endpoint, snap.detail) == ("ready", chk.endpoint, ready[-1].detail)


async def test_after_ready_a_dead_endpoint_turns_the_deployment_unhealthy_and_back(fake_cluster):
    api = _Api(warmup=0, model="tiny")
    port = await api.start()
    fc = await fake_cluster(2)
    for n in fc.nodes:
        n.server.forwarding = True
    plan = plan_for(fc.config, PlanOptions(engine="sglang", port=port))
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, poll_interval=0.05, health_interval=0.05)
        try:
            await d.launch(plan)
            assert await d.wait(15) == "ready"
            api.server.close()  # the engine dies after it was proven ready
            await api.server.wait_closed()
            assert await d.wait(15, until=("unhealthy",)) == "unhealthy"
            lost = rec.of(EndpointHealth)
            assert lost and not lost[-1].ok and "/health" in lost[-1].detail
            assert any(p.kind == "endpoint_unhealthy" for p in d.problems)
            api.server = await asyncio.start_server(api.handle, "127.0.0.1", port)  # it comes back
            assert await d.wait(15, until=("ready",)) == "ready"
            assert rec.of(EndpointHealth)[-1].ok
        finally:
            await d.close()
            api.server.close()


async def test_a_launch_that_could_not_watch_itself_is_refused_before_anything_runs(fake_cluster):
    fc = await fake_cluster(2)
    fc.config.ssh.max_channels = 1  # the engine's log would hold the only channel
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus())
        try:
            with pytest.raises(
                DeployError,
                match="needs 2 SSH sessions .* nothing was started: ssh.max_channels is 1; set it to at least 2",
            ):
                await d.launch(plan)
        finally:
            await d.close()
    assert runs(fc) == []


async def test_the_launch_timeout_bounds_its_wait_steps(fake_cluster):
    fc = await fake_cluster(2, ray_nodes=1)  # the worker never joins: `ray status` lists 1 node
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    wait = next(s for s in plan.steps if s.kind == "wait")
    assert (wait.timeout or 600) > 30  # the step alone would wait far longer than the launch may
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, ready_timeout=4, wait_interval=0.2)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            await asyncio.wait_for(d.launch(plan), 30)
            took = loop.time() - t0
        finally:
            await d.close()
    assert d.current.state == "failed" and took < 10, (d.current.state, took)
    failed = [e for e in rec.of(LaunchStep) if e.state == "failed"]
    assert failed and "(the launch's timeout)" in failed[0].detail, failed


NCCL_DYING = "[2026-03-02 10:14:40 TP1] NCCL error: remote process exited or there was a network error"


async def test_a_stop_from_another_process_reads_as_stopped_not_as_an_nccl_failure(fake_cluster):
    from sparktui.core.deploy import stopmark

    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    async with Cluster(fc.config) as cluster:
        # an earlier stop left its mark: this launch clears it, so the engine's own failure is a failure
        await stopmark.mark(cluster["n1"], "lab")
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, stop_grace=1)
        try:
            await d.launch(plan)
            worker = next(c for c in fc["n2"].names() if c.startswith("sparktui-lab-"))
            fc["n2"].write_log(worker, NCCL_DYING)
            await rec.wait_for(lambda e: isinstance(e, DeploymentChanged) and e.state == "failed")
        finally:
            await d.close()
        # now another process stops it while this one watches: the engines die with NCCL errors on the way
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, stop_grace=1)
        try:
            await d.launch(plan, if_exists="replace")
            rec.events.clear()  # (the replace stopped the first launch's containers itself)
            other = Deployer(cluster, fc.config, EventBus(), stop_grace=1)
            await stopmark.mark(cluster["n1"], "lab")  # what `stop` does first, before removing anything
            worker = next(c for c in fc["n2"].names() if c.startswith("sparktui-lab-"))
            fc["n2"].write_log(worker, NCCL_DYING)
            await other.stop()
            e = await rec.wait_for(lambda e: isinstance(e, DeploymentChanged) and e.state in ("stopped", "failed"))
            assert e.state == "stopped" and "stopped from elsewhere" in e.detail
            assert d.current.state == "stopped"
        finally:
            await d.close()


async def test_a_container_an_earlier_launch_started_after_this_one_looked_is_resumed(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    worker = next(s for s in plan.steps if s.kind == "run" and s.node == "n2")
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, wait_interval=0.1)
        look = d.existing

        async def look_then_land(nodes=None):
            found = await look(nodes)
            # a killed launch's `docker run` on n2 lands just after this launch looked
            assert (await cluster["n2"].run(worker.command)).ok
            return found

        d.existing = look_then_land
        try:
            await d.launch(plan)
            steps = [(e.node, e.kind, e.state) for e in rec.of(LaunchStep) if e.state in ("skipped", "failed")]
        finally:
            await d.close()
    assert steps == [("n2", "run", "skipped")]
    assert sorted(n for n, _ in runs(fc)) == ["n1", "n2", "n2"]  # the late one, then ours refused by its name
    assert d.current.state != "failed"


async def test_a_container_of_another_plan_in_the_way_still_fails_the_step(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    worker = next(s for s in plan.steps if s.kind == "run" and s.node == "n2")
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, wait_interval=0.1)
        look = d.existing

        async def look_then_land(nodes=None):
            found = await look(nodes)
            fc["n2"].add_container(worker.container, {"sparktui.deployment": "lab", "sparktui.plan": "other"})
            return found

        d.existing = look_then_land
        try:
            await d.launch(plan)
            failed = [(e.node, e.kind) for e in rec.of(LaunchStep) if e.state == "failed"]
        finally:
            await d.close()
    assert failed == [("n2", "run")]
    assert d.current.state == "failed" and "already in use" in d.current.detail


async def test_a_container_of_this_plan_left_created_by_a_killed_launch_is_replaced(fake_cluster, monkeypatch):
    from sparktui.core.deploy import orchestrator

    monkeypatch.setattr(orchestrator, "CREATED_GRACE_S", 0.5)  # its maker died between create and start
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    worker = next(s for s in plan.steps if s.kind == "run" and s.node == "n2")
    async with Cluster(fc.config) as cluster:
        bus = EventBus()
        rec = Recorder(bus)
        d = Deployer(cluster, fc.config, bus, wait_interval=0.1)
        look = d.existing

        async def look_then_land(nodes=None):
            found = await look(nodes)
            fc["n2"].add_container(
                worker.container, {"sparktui.deployment": "lab", "sparktui.plan": plan.plan_id}, state="created"
            )
            return found

        d.existing = look_then_land
        try:
            await d.launch(plan)
            n2 = [e.state for e in rec.of(LaunchStep) if e.node == "n2" and e.kind == "run"]
        finally:
            await d.close()
    assert n2[-1] == "done" and "failed" not in n2
    assert fc["n2"].meta(worker.container)["state"] == "running"
    assert d.current.state != "failed"


async def test_a_strangers_container_in_the_way_fails_the_step_at_once(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="vllm", mode="ray"))
    worker = next(s for s in plan.steps if s.kind == "run" and s.node == "n2")
    fc["n2"].add_container(worker.container, {})  # no label: never ours, and no waiting for it to become so
    async with Cluster(fc.config) as cluster:
        d = Deployer(cluster, fc.config, EventBus(), wait_interval=0.1)
        try:
            await d.launch(plan)
        finally:
            await d.close()
    assert d.current.state == "failed" and "already in use" in d.current.detail
    looks = [a for n, a in fc.calls() if n == "n2" and a[:1] == ["inspect"] and worker.container in a]
    assert len(looks) == 1  # one look, not a poll until the late-start wait ran out
