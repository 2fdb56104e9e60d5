"""TensorRT-LLM in `sparktui demo`: picked in the launch form it comes up over MPI, its own lines fill the log pane
and the endpoint answers a chat completion; a paused rank ends in its hang detector, named live; headless, `launch --engine trtllm` then `pivot --to vllm` reach
ready. The demo's nodes share one kernel, so each node's container sshd (port 2233) must hold its own addresses."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

from textual.widgets import Select

from sparktui.core.config.config import load_config
from sparktui.core.remote.ssh import Cluster
from sparktui.tui.app import SparkApp
from sparktui.tui.forms.launch_form import LaunchForm

from ..tui.conftest import wait_for
from .conftest import load_json_lines, sparktui, sparktui_argv

# lines only TensorRT-LLM's processes print: trtllm-llmapi-launch, the version banner, the C++ runtime
OWN_LINES = (
    "rank0 run mgmn leader node with mpi_world_size: 2",
    "[TensorRT-LLM] TensorRT-LLM version: 1.3.0rc5",
    "[TensorRT-LLM][INFO] MPI size: 2",
    "Application startup complete.",
)


def _chat(endpoint: str, model: str) -> dict:
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}
    ).encode()
    req = urllib.request.Request(
        f"{endpoint}/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


async def _metrics_around_a_chat(cli_env, conf: list[str], endpoint: str, model: str) -> dict:
    """`metrics --json --watch`: a chat completion sent after its first report (two scrapes made) shows in the
    first later report whose window holds it; that report."""
    p = await asyncio.create_subprocess_exec(
        *sparktui_argv(),
        *conf,
        "metrics",
        "--json",
        "--watch",
        "--interval",
        "1",
        "--count",
        "60",
        env=cli_env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        first = await asyncio.wait_for(p.stdout.readline(), 90)
        assert first, (await p.stderr.read()).decode()
        assert json.loads(first)["ttft_p50_s"] is None  # nothing served between its first two scrapes
        await asyncio.to_thread(_chat, endpoint, model)
        while line := await asyncio.wait_for(p.stdout.readline(), 30):
            report = json.loads(line)
            if report["ttft_p50_s"] is not None:
                return report
        raise AssertionError(f"no report showed the chat's TTFT: {(await p.stderr.read()).decode()}")
    finally:
        if p.returncode is None:
            p.kill()
        await p.wait()


async def _synced(demo, cli_env) -> None:
    rc, out, err = await sparktui(cli_env, "--config", str(demo.config_path), "sync", "model", "--wait", "--json")
    assert rc == 0, out + err


async def _engine_containers(config) -> dict[str, list[str]]:
    async with Cluster(config) as cluster:
        out = {}
        for n in ("spark1", "spark2"):
            r = await cluster[n].run(
                ["docker", "ps", "--format", "{{.Names}}", "--filter", "label=sparktui.deployment"]
            )
            out[n] = r.stdout.split()
        return out


WORKER = "sparktui-DEMO-simulated-cluster-trtllm-1"


async def _docker(config, node: str, *args: str) -> None:
    async with Cluster(config) as cluster:
        r = await cluster[node].run(["docker", *args])
        assert r.ok, r.stderr


def _chat_status(endpoint: str, model: str) -> int:
    try:
        _chat(endpoint, model)
        return 200
    except urllib.error.HTTPError as e:
        return e.code


async def test_tensorrt_llm_picked_in_the_form_serves_with_its_own_log_lines(demo, cli_env):
    await _synced(demo, cli_env)
    config = load_config(demo.config_path)
    app = SparkApp(config)
    paused = False
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.inventory_ready, 60, "the nodes probed")
            await pilot.press("l")
            form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen, 30, "the form")
            engine = form.query_one("#engine", Select)
            assert "trtllm:mpi" in [v for _, v in engine._options]
            engine.value = "trtllm:mpi"
            plan = await wait_for(
                pilot,
                lambda: form.plan if form.plan and form.plan.engine == "trtllm" else None,
                30,
                "a TensorRT-LLM plan in the form",
            )
            assert plan.ok, plan.errors
            assert plan.image == "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5"
            assert plan.port == config.port_for("trtllm")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.deploy_state == "ready", 240, "TensorRT-LLM ready")
            assert app.deployment.engine == "trtllm"
            # sparktui's own check after ready: one chat completion through the local SSH forward
            await wait_for(
                pilot,
                lambda: any("answered in" in n.message for n in app._notifications),
                60,
                "the endpoint check's chat completion",
            )
            log = app.launch_pane.log
            log.flush_now()
            shown = "\n".join(log.shown)
            for line in OWN_LINES:
                assert line in shown, line
            assert "vLLM API server" not in shown and "sglang" not in shown.lower()
            endpoint = app.endpoint
            assert endpoint == f"http://{config.head.host}:{config.port_for('trtllm')}/v1"
            answer = await asyncio.to_thread(_chat, endpoint, config.model.name)
            assert answer["choices"][0]["message"]["content"].strip(), answer
            assert answer["model"] == config.model.name  # trtllm-serve names the model directory's basename
            # rank 1's container frozen (docker pause): a chat's step holds on the head until TensorRT-LLM's hang
            # detector (300 engine seconds) ends it; the live log follower names it in the launch pane
            await _docker(config, "spark2", "pause", WORKER)
            paused = True
            held = asyncio.ensure_future(asyncio.to_thread(_chat_status, endpoint, config.model.name))
            await wait_for(pilot, lambda: app.deploy_state == "failed", 120, "the hang detector's failure")
            assert "hang detector" in (app.launch_pane.detail or ""), app.launch_pane.detail
            problems = str(app.launch_pane.query_one("#problems").render())
            assert "no progress for 300 s" in problems and "docker ps" in problems, problems
            assert await asyncio.wait_for(held, 60) == 500  # the request in flight ended with the engine's error
    finally:
        if paused:
            await _docker(config, "spark2", "unpause", WORKER)
        await asyncio.wait_for(app.controller.close(), 30)
        rc, out, err = await sparktui(cli_env, "--config", str(demo.config_path), "stop", "--yes")
        assert rc == 0, out + err
    assert await _engine_containers(config) == {"spark1": [], "spark2": []}


async def test_launch_tensorrt_llm_then_pivot_to_vllm_headless(demo, cli_env):
    await _synced(demo, cli_env)
    conf = ["--config", str(demo.config_path)]
    config = load_config(demo.config_path)
    # the image answers the support check from its own registry before anything starts
    rc, out, err = await sparktui(cli_env, *conf, "plan", "--engine", "trtllm", "--json", timeout=120)
    assert rc == 0, out + err
    support = json.loads(out)["support"]
    assert (support["status"], support["engine_version"]) == ("supported", "1.3.0rc5"), support
    rc, out, err = await sparktui(
        cli_env, *conf, "launch", "--engine", "trtllm", "--wait", "--yes", "--json", timeout=240
    )
    assert rc == 0, out + err
    launched = json.loads(out)
    assert (launched["engine"], launched["mode"], launched["state"]) == ("trtllm", "mpi", "ready"), out
    assert launched["endpoint"] == f"http://{config.head.host}:{config.port_for('trtllm')}/v1"
    assert launched["check"]["model"] == config.model.name and launched["check"]["reply"].strip()
    rc, out, err = await sparktui(cli_env, *conf, "logs", "--json", timeout=60)
    assert rc == 0, out + err
    lines = load_json_lines(out)
    head = "\n".join(x["line"] for x in lines if x["node"] == "spark1")
    assert all(line in head for line in OWN_LINES), head
    # the worker's container log holds its rank 1 only: the wait for its sshd's port started no rank
    worker = [x["line"] for x in lines if x["node"] == "spark2" and x["line"].startswith("mpi_rank:")]
    assert worker == ["mpi_rank: 1"], worker
    assert await _engine_containers(config) == {
        "spark1": ["sparktui-DEMO-simulated-cluster-trtllm-0"],
        "spark2": ["sparktui-DEMO-simulated-cluster-trtllm-1"],
    }
    # /prometheus/metrics of the release: TTFT and the per-request TPOT (read as ITL) move, its lacks are named
    report = await _metrics_around_a_chat(cli_env, conf, launched["endpoint"], config.model.name)
    assert report["engine"] == "trtllm" and report["itl_p50_s"] > 0 and report["parse_errors"] == 0, report
    assert report["missing"] == ["running", "waiting", "kv_cache_usage", "prompt_tokens", "generation_tokens"]
    rc, out, err = await sparktui(cli_env, *conf, "pivot", "--to", "vllm", "--wait", "--yes", "--json", timeout=240)
    assert rc == 0, out + err
    pivoted = json.loads(out)
    assert (pivoted["engine"], pivoted["state"]) == ("vllm", "ready"), out
    answer = await asyncio.to_thread(_chat, pivoted["endpoint"], config.model.name)
    assert answer["choices"][0]["message"]["content"].strip(), answer
    running = await _engine_containers(config)
    assert all(not any("-trtllm-" in c for c in names) for names in running.values()), running
    assert all(any("-vllm-" in c for c in names) for names in running.values()), running
    rc, out, err = await sparktui(cli_env, *conf, "stop", "--yes")
    assert rc == 0, out + err
