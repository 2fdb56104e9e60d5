"""Simulated SGLang as local processes: two "nodes" are two loopback addresses (127.0.0.0/8)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.simhelpers import (
    SimProcess,
    free_port,
    group_alive,
    http,
    launcher_argv,
    make_model,
    module_argv,
    sse_events,
)

SPEED = 50
READY = "The server is fired up and ready to roll!"
BEGIN = "Init torch distributed begin."
WATCHDOG = "Scheduler watchdog timeout"


@pytest.fixture
def model(tmp_path):
    return str(make_model(tmp_path / "qwen", shards=4))


def sglang(model: str, *args: str, **kw) -> SimProcess:
    return SimProcess(module_argv("sglang.launch_server", "--model-path", model, *args), speed=SPEED, **kw)


def two_nodes(model: str, dist_port: int, http_port: int, extra=(), env0=None, env1=None, **kw):
    common = ["--tp", "2", "--nnodes", "2", "--dist-init-addr", f"127.0.0.2:{dist_port}", *extra]
    worker = sglang(model, *common, "--node-rank", "1", extra_env=env1, **kw.get("kw1", {}))
    head = sglang(
        model,
        *common,
        "--node-rank",
        "0",
        "--host",
        "127.0.0.2",
        "--port",
        str(http_port),
        extra_env=env0,
        **kw.get("kw0", {}),
    )
    return head, worker


def test_two_ranks_reach_ready_and_answer_chat(model):
    dist, port = free_port("127.0.0.2"), free_port("127.0.0.2")
    head, worker = two_nodes(
        model, dist, port, env0={"SGLANG_HOST_IP": "127.0.0.2"}, env1={"SGLANG_HOST_IP": "127.0.0.3"}
    )
    with worker, head:  # workers first, head last, as the plans do
        ready = head.wait_for(READY, timeout=60)
        lines = head.snapshot()
        # SGLang's order on a multi-node start
        order = [
            head.find(s)
            for s in (
                BEGIN,
                "CustomAllreduce is disabled because this process group spans across nodes.",
                "Init torch distributed ends.",
                "Load weight begin.",
                "Loading safetensors checkpoint shards: 100% Completed | 4/4",
                "KV Cache is allocated.",
                "Capture cuda graph end.",
                "Uvicorn running on http://127.0.0.2:",
                READY,
            )
        ]
        assert all(i >= 0 for i in order) and order == sorted(order), lines
        assert ready == order[-1]
        worker.wait_for("max_total_num_tokens=", timeout=30)
        assert worker.find("Uvicorn") < 0  # only rank 0 serves HTTP

        base = f"http://127.0.0.2:{port}"
        assert http("GET", f"{base}/health")[0] == 200
        assert http("GET", f"{base}/health_generate")[0] == 200
        status, body = http(
            "POST",
            f"{base}/v1/chat/completions",
            {"model": "any", "messages": [{"role": "user", "content": "What is 19+23?"}]},
        )
        answer = json.loads(body)
        assert status == 200 and str(19 + 23) in answer["choices"][0]["message"]["content"]
        assert answer["usage"]["prompt_tokens"] > 0 and answer["usage"]["completion_tokens"] > 0

        chat = {"messages": [{"role": "user", "content": "How does tensor parallelism split a layer?"}]}
        whole = json.loads(http("POST", f"{base}/v1/chat/completions", chat)[1])["choices"][0]["message"]["content"]
        events = list(sse_events(f"{base}/v1/chat/completions", dict(chat, stream=True)))
        assert events[-1] == "[DONE]" and len(events) > 3
        text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1])
        assert text == whole  # the stream carries the same answer, piece by piece

        # a node going away: the head reports the broken collective, keeps HTTP up, answers 503
        worker.terminate()
        head.wait_for("Rank 0 scheduler is dead", timeout=30)
        assert http("GET", f"{base}/health")[0] == 503
        assert head.terminate() == 0  # SIGTERM, as docker stop sends
    assert head.find("Finished server process") > 0
    assert not group_alive(head) and not group_alive(worker)  # nothing left behind


def test_sglang_serve_runs_the_same_server_where_the_release_has_the_command(model):
    port = free_port("127.0.0.2")
    with SimProcess(
        launcher_argv("sglang", "serve", model, "--host", "127.0.0.2", "--port", str(port)), speed=SPEED
    ) as server:  # the model positional, as `sglang serve MODEL` takes it
        server.wait_for(READY, timeout=60)
        assert http("GET", f"http://127.0.0.2:{port}/health")[0] == 200
    old = SimProcess(
        launcher_argv("sglang", "serve", "--model-path", model),
        speed=SPEED,
        extra_env={"SPARKTUI_SIM_SGLANG_VERSION": "0.5.4.post3"},
    )
    with old:  # before 0.5.5 the image has no such program
        assert old.wait_exit(timeout=30) == 127
        assert old.find("sglang: not found") >= 0


def test_the_simulated_command_and_the_plans_agree_on_the_first_release_with_it():
    from sparktui.core.engines.sglang import SGLANG_SERVE_SINCE
    from sparktui.sim.shims.sglang.cli import main as cli

    assert cli.SERVE_SINCE == SGLANG_SERVE_SINCE


def test_unreachable_dist_init_address_hangs_until_the_watchdog(model):
    dead_port = free_port("127.0.0.9")  # nothing listens there
    started = time.monotonic()
    with sglang(
        model,
        "--tp",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--watchdog-timeout",
        "100",
        "--dist-init-addr",
        f"127.0.0.9:{dead_port}",
    ) as rank1:
        begin = rank1.wait_for(BEGIN, timeout=30)
        dog = rank1.wait_for(WATCHDOG, timeout=30)
        assert rank1.wait_exit(timeout=30) == 137
    # frozen: not one line between the start of the rendezvous and the watchdog
    assert dog == begin + 1, rank1.snapshot()
    assert "self.watchdog_timeout=100" in rank1.snapshot()[dog]
    assert time.monotonic() - started >= 100 / SPEED
    assert rank1.find("Rank 0 scheduler is dead") > dog


def test_dist_timeout_ends_the_wait_with_torch_s_error(model):
    dead_port = free_port("127.0.0.9")
    with sglang(
        model,
        "--tp",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--dist-timeout",
        "60",
        "--dist-init-addr",
        f"127.0.0.9:{dead_port}",
    ) as rank1:
        rank1.wait_for(
            f"The client socket has timed out after 60000ms while trying to connect to (127.0.0.9, {dead_port})",
            timeout=30,
        )
        assert rank1.wait_exit(timeout=30) != 0


def test_dist_init_address_of_another_machine_fails_to_bind(model):
    # 127.0.0.3 belongs to the other simulated node, not to this one
    with sglang(
        model,
        "--tp",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        "0",
        "--dist-init-addr",
        f"127.0.0.3:{free_port('127.0.0.3')}",
        interfaces="lo=127.0.0.1/32,fab0=127.0.0.2/24",
    ) as rank0:
        rank0.wait_for("The server socket has failed to bind to 127.0.0.3", timeout=30)
        assert rank0.wait_exit(timeout=30) == 137


def test_host_ip_scenario_freezes_both_ranks_after_custom_allreduce(model):
    dist, port = free_port("127.0.0.2"), free_port("127.0.0.2")
    # each node has a management network and the fabric; the queue address lands on the management one
    head, worker = two_nodes(
        model,
        dist,
        port,
        extra=["--watchdog-timeout", "150"],
        env0={"SGLANG_HOST_IP": "127.0.0.2"},
        env1={"SGLANG_HOST_IP": "127.0.0.3"},
        kw0={"scenarios": ("sglang-host-ip",), "interfaces": "mgmt0=127.1.0.2/16,fab0=127.0.0.2/24"},
        kw1={"scenarios": ("sglang-host-ip",), "interfaces": "mgmt0=127.1.0.3/16,fab0=127.0.0.3/24"},
    )
    with worker, head:
        for node in (head, worker):
            allreduce = node.wait_for("CustomAllreduce is disabled", timeout=30)
            dog = node.wait_for(WATCHDOG, timeout=30)
            assert dog == allreduce + 1, node.snapshot()
            assert node.find("Init torch distributed ends") < 0


def test_host_ip_scenario_is_harmless_on_a_single_network(model):
    dist, port = free_port("127.0.0.2"), free_port("127.0.0.2")
    head, worker = two_nodes(
        model,
        dist,
        port,
        kw0={"scenarios": ("sglang-host-ip",), "interfaces": "fab0=127.0.0.2/24"},
        kw1={"scenarios": ("sglang-host-ip",), "interfaces": "fab0=127.0.0.3/24"},
    )
    with worker, head:
        head.wait_for(READY, timeout=60)


def test_missing_model_path_is_the_engine_s_error(tmp_path):
    with sglang(str(tmp_path / "missing"), "--port", str(free_port())) as proc:
        assert proc.wait_exit(timeout=30) == 1
    assert proc.find(f"OSError: Can't load the configuration of '{tmp_path / 'missing'}'") >= 0


def test_an_unknown_flag_is_refused_as_the_real_parser_does(tmp_path):
    with sglang(str(tmp_path / "missing"), "--port", str(free_port()), "--some-future-flag", "3") as proc:
        assert proc.wait_exit(timeout=30) == 2
    assert proc.find("error: unrecognized arguments: --some-future-flag 3") >= 0
    assert proc.find("OSError") < 0  # refused before anything loads


def test_port_in_use_is_reported_by_uvicorn_after_loading(model):
    with socket.socket() as taken:
        taken.bind(("127.0.0.4", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with sglang(model, "--host", "127.0.0.4", "--port", str(port)) as proc:
            assert proc.wait_exit(timeout=60) == 1
    err = proc.find(
        f"[Errno 98] error while attempting to bind on address ('127.0.0.4', {port}): address already in use"
    )
    assert err > proc.find("Load weight end.") > 0
    assert proc.find(READY) < 0


def test_oom_scenario_fails_during_weight_loading(model):
    with sglang(model, "--port", str(free_port()), scenarios=("oom",)) as proc:
        proc.wait_for("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", timeout=60)
        assert proc.wait_exit(timeout=30) == 137
    assert proc.find("Load weight end.") < 0
    assert proc.find("Received sigquit from a child process") > 0


def test_checkpoint_too_big_for_one_gpu_runs_out_of_memory(tmp_path):
    big = str(make_model(tmp_path / "big", total_bytes=118 * 1024**3))
    with sglang(big, "--port", str(free_port())) as proc:
        proc.wait_for("CUDA out of memory", timeout=60)
        assert proc.wait_exit(timeout=30) == 137


def test_a_model_type_the_images_transformers_lacks_is_the_engine_s_error(tmp_path):
    """SGLang 0.5.3.post3's image (transformers 4.57.1) on a Qwen3.5 checkpoint: transformers' own refusal,
    which the log signature `unsupported_model` names (core/engines/logsigns.py)."""
    from sparktui.core.engines.logsigns import SIGNS

    path = str(
        make_model(
            tmp_path / "qwen35",
            shards=1,
            config={"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"},
        )
    )
    with sglang(path, "--port", str(free_port()), extra_env={"SPARKTUI_SIM_SGLANG_VERSION": "0.5.3.post3"}) as proc:
        assert proc.wait_exit(timeout=30) == 1
    at = proc.find("model type `qwen3_5_moe` but Transformers does not recognize this architecture")
    assert at >= 0, proc.snapshot()
    signs = [s for s in SIGNS if s.kind == "unsupported_model" and "sglang" in s.engines]
    assert any(sign.pattern.search(line) for sign in signs for line in proc.snapshot())
    # the release whose transformers knows it loads the same checkpoint past that point
    with sglang(path, "--port", str(free_port()), extra_env={"SPARKTUI_SIM_SGLANG_VERSION": "0.5.23"}) as proc:
        proc.wait_for("server_args=", timeout=30)
        assert proc.find("does not recognize this architecture") < 0
