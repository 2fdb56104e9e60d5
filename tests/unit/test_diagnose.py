"""Diagnosis on realistic engine logs: one transcript per problem kind and per ready path."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.core.diagnosis.diagnose import (
    Diagnoser,
    Milestone,
    Problem,
    ProblemCleared,
    parse_docker_ts,
    strip_prefixes,
)

T = Path(__file__).parent / "transcripts"


def run(name: str, engine: str | None = None, **kw) -> Diagnoser:
    engine = engine or ("sglang" if name.startswith("sglang") else "vllm")
    d = Diagnoser(engine, **kw)
    with open(T / name, encoding="utf-8") as f:
        for line in f:
            d.feed(line)
    d.finish()
    return d


def kinds(d: Diagnoser) -> list[str]:
    return [p.kind for p in d.ordered_problems()]


def milestone_kinds(d: Diagnoser) -> list[str]:
    return [m.kind for m in d.milestones]


# ---- ready paths --------------------------------------------------------------------------------


def test_sglang_ready_path():
    d = run("sglang_ready.log")
    assert d.state == "ready" and d.problems == []
    ks = milestone_kinds(d)
    for k in (
        "container_started",
        "dist_init_begin",
        "transport",
        "dist_init_end",
        "weights_loading",
        "kv_cache",
        "cuda_graph",
        "ready",
    ):
        assert k in ks, k
    assert ks.index("dist_init_begin") < ks.index("dist_init_end") < ks.index("weights_loading") < ks.index("ready")
    pct = [m.data["percent"] for m in d.milestones if m.kind == "weights_loading"]
    assert pct == [0, 26, 51, 77, 100]  # the repeated 100 % line is not a new milestone
    kv = next(m for m in d.milestones if m.kind == "kv_cache")
    assert kv.data == {"tokens": 1462784, "size_gb": 39.06}
    transport = next(m for m in d.milestones if m.kind == "transport")
    assert transport.data == {"transport": "rdma", "device": "rocep1s0f1", "link": "RoCE"}
    # SGLang's own uvicorn "Application startup complete." comes before warm-up: not ready yet
    ready = next(m for m in d.milestones if m.kind == "ready")
    assert "fired up" in ready.text


def test_vllm_ray_ready_path():
    d = run("vllm_ray_ready.log")
    assert d.state == "ready" and d.problems == []
    ks = milestone_kinds(d)
    for k in (
        "ray_started",
        "dist_init_begin",
        "ray_connected",
        "transport",
        "dist_init_end",
        "weights_loading",
        "slow_load",
        "kv_cache",
        "cuda_graph",
        "ready",
    ):
        assert k in ks, k
    tokens = [m.data["tokens"] for m in d.milestones if m.kind == "kv_cache" and "tokens" in m.data]
    assert tokens == [1051712]
    phases = [m.data["phase"] for m in d.milestones if m.kind == "cuda_graph"]
    assert phases == ["begin", "end"]


def test_vllm_native_ready_path_over_sockets():
    d = run("vllm_native_ready.log")
    assert d.state == "ready" and d.problems == []
    transport = [m.data for m in d.milestones if m.kind == "transport"]
    assert transport == [{"transport": "socket", "iface": "enp1s0f1np1"}]
    assert [m.data["percent"] for m in d.milestones if m.kind == "weights_loading"] == [0, 51, 100]


# ---- one transcript per problem kind -----------------------------------------------------------


def test_ray_started_locally_names_the_engine_that_runs_ray():
    from sparktui.core.engines import label

    d = run("vllm_ray_local.log")
    p = next(p for p in d.problems if p.kind == "ray_resources")
    assert p.hint.startswith(f"{label('vllm')} started its own Ray"), p.hint


@pytest.mark.parametrize(
    "name,first,state",
    [
        ("sglang_hang_cut.log", "stopped", "hung"),
        ("sglang_nccl_iface.log", "nccl_error", "failed"),
        ("vllm_oom.log", "out_of_memory", "failed"),
        ("vllm_ray_local.log", "ray_resources", "failed"),
        ("vllm_watchdog.log", "watchdog_timeout", "failed"),
        ("vllm_port_in_use.log", "port_in_use", "failed"),
        ("sglang_model_missing.log", "model_not_found", "failed"),
        ("vllm_unsupported.log", "unsupported_model", "failed"),
        ("sglang_scheduler_traceback.log", "traceback", "failed"),
        ("vllm_native_unreachable.log", "rendezvous_hang", "failed"),
        ("vllm_truncated_shard.log", "checkpoint_incomplete", "failed"),
        ("vllm_ray_missing.log", "ray_missing", "failed"),
        ("vllm_old_native_flags.log", "bad_arguments", "failed"),
    ],
)
def test_problem_transcripts(name, first, state):
    d = run(name)
    assert kinds(d)[0] == first, kinds(d)
    assert d.state == state
    assert all(p.hint for p in d.problems)
    assert d.to_json()["ready"] is False


def test_sglang_cross_node_hang_when_the_file_ends():
    d = run("sglang_hang_cut.log")
    (p,) = d.problems
    # every communicator completed (Init COMPLETE), then nothing: stopped after NCCL init on rank 0
    assert (p.kind, p.phase, p.rank) == ("stopped", "nccl_init", 0)
    assert p.message.startswith("stopped after NCCL communicator init on rank 0, before weight loading")
    assert "rendezvous hang" in p.message and "Custom allreduce is disabled" in p.message
    assert "SGLANG_HOST_IP" in p.hint and "sparktui pivot --to vllm" in p.hint


def test_sglang_hang_seen_in_docker_timestamps_then_watchdog():
    d = run("sglang_hang_watchdog.log")
    ks = kinds(d)
    # the watchdog's kill is the failure; the silence before it, proven by the timestamps, its cause
    assert ks[:2] == ["watchdog_timeout", "rendezvous_hang"] and ks[-1] == "engine_died"
    hang = d.problems[0]
    assert "no output for 300 s" in hang.message and hang.line == 5
    watchdog = next(p for p in d.problems if p.kind == "watchdog_timeout")
    assert "during distributed init" in watchdog.message and "SGLANG_HOST_IP" in watchdog.hint


def test_traceback_takes_the_exception_line_and_the_death_comes_after_it():
    d = run("sglang_scheduler_traceback.log")
    tb, died = d.ordered_problems()
    assert tb.message == "KeyError: 'model.layers.0.mlp.experts.w2_weight_scale_inv'" and tb.line == 6
    assert died.kind == "engine_died"


def test_root_cause_is_listed_before_the_engine_death():
    d = run("vllm_oom.log")
    assert kinds(d) == ["out_of_memory", "engine_died"]
    assert [p.kind for p in d.problems][0] == "engine_died"  # printed first, ordered last


def test_ray_hint_names_the_local_instance():
    d = run("vllm_ray_local.log")
    assert "RAY_ADDRESS" in d.ordered_problems()[0].hint


def test_chained_tracebacks_give_one_problem():
    d = run("sglang_model_missing.log")
    assert kinds(d) == ["model_not_found"]


def test_one_failure_restated_in_a_traceback_counts_once():
    d = run("sglang_nccl_iface.log")
    assert kinds(d) == ["nccl_error", "nccl_error", "engine_died"]
    assert "NCCL_SOCKET_IFNAME" in d.problems[0].hint


def test_old_vllm_without_native_flags_points_to_ray():
    d = run("vllm_old_native_flags.log")
    assert "--mode ray" in d.problems[0].hint


def test_a_stack_dump_while_serving_is_not_a_failure():
    d = run("vllm_harmless_traceback.log")
    assert d.state == "ready" and d.problems == []
    (c,) = d.cleared
    assert c.problem.kind == "traceback" and "TemplateError" in c.problem.message


# ---- live feeding: timestamps, silence, progress -----------------------------------------------


def test_docker_timestamp_is_parsed_and_stripped():
    t, rest = parse_docker_ts("2026-03-02T10:14:12.118273645Z [2026-03-02 10:14:12 TP0] Init torch distributed begin.")
    assert rest.startswith("[2026-03-02 10:14:12 TP0]")
    assert t == pytest.approx(1772446452.118273645, abs=1e-5)
    t2, _ = parse_docker_ts("2026-03-02T11:14:12+01:00 x")
    assert t2 == pytest.approx(1772446452, abs=1e-6)
    assert parse_docker_ts("no timestamp") == (None, "no timestamp")


def test_prefixes_are_stripped_for_traceback_structure():
    assert (
        strip_prefixes(
            "(EngineCore_DP0 pid=790) (RayWorkerWrapper pid=1, ip=192.168.100.11) ERROR 03-02 "
            '11:19:02 [core.py:708]   File "x"'
        )
        == '  File "x"'
    )
    assert strip_prefixes("[2026-01-15 13:56:49 DP1 TP1] KeyError: 'x'") == "KeyError: 'x'"


def test_silence_inside_distributed_init_is_a_hang_and_a_late_end_clears_it():
    d = Diagnoser("sglang", hang_after=90)
    d.feed("[2026-03-02 10:14:12 TP0] Init torch distributed begin.", node="spark2", now=1000.0)
    d.feed(
        "[2026-03-02 10:14:24 TP0] Custom allreduce is disabled because this process group spans across nodes.",
        node="spark2",
        now=1012.0,
    )
    assert d.tick(1101.0) == []  # 89 s of silence
    (p,) = d.tick(1102.0)
    assert isinstance(p, Problem) and p.kind == "rendezvous_hang" and p.node == "spark2"
    assert d.state == "hung"
    assert d.tick(1200.0) == []  # flagged once
    events = d.feed(
        "[2026-03-02 10:16:00 TP0] Init torch distributed ends. mem usage=0.42 GB", node="spark2", now=1210.0
    )
    assert any(isinstance(e, ProblemCleared) for e in events)
    assert any(isinstance(e, Milestone) and e.kind == "dist_init_end" for e in events)
    assert d.state == "loading" and d.problems == []


def test_silence_outside_distributed_init_has_the_limit_of_its_phase():
    d = Diagnoser("vllm", hang_after=10, limits={"weights": 1800})
    d.feed("Loading safetensors checkpoint shards:  10% Completed | 4/39 [01:30<13:00, 22.0s/it]", now=0.0)
    assert d.tick(1799.0) == []  # a slow load is not a hang: hang_after is for the init phases
    (p,) = d.tick(1800.0)
    assert (p.kind, p.phase, p.provisional) == ("stalled", "weights", True) and "1800 s" in p.message
    assert d.state == "hung" and d.tick(3000.0) == []  # flagged once
    events = d.feed("Loading safetensors checkpoint shards:  13% Completed | 5/39 [31:30<13:00, 22.0s/it]", now=1900.0)
    assert any(isinstance(e, ProblemCleared) for e in events) and d.state == "loading"


def test_carriage_return_progress_in_one_line():
    d = Diagnoser("vllm")
    line = "\r".join(
        f"Loading safetensors checkpoint shards: {p:3d}% Completed | {k}/4 [00:10<00:30, 10.0s/it]"
        for k, p in ((0, 0), (1, 25), (2, 50), (3, 75))
    )
    events = d.feed(line + "\n")
    assert [e.data["percent"] for e in events if isinstance(e, Milestone) and e.kind == "weights_loading"] == [
        0,
        25,
        50,
        75,
    ]
    assert {m.line for m in d.milestones} == {1}


def test_lines_per_node_are_counted_apart():
    d = Diagnoser("sglang")
    d.feed("hello", node="a")
    d.feed("hello", node="b")
    d.feed("[2026-03-02 10:40:11] Received sigquit from a child process. It usually means the child failed.", node="b")
    (p,) = d.problems
    assert (p.node, p.line) == ("b", 2)


def test_a_traceback_cut_off_at_the_end_is_reported():
    d = Diagnoser("vllm")
    d.feed("Traceback (most recent call last):")
    d.feed('  File "/x.py", line 1, in <module>')
    d.finish()
    assert kinds(d) == ["traceback"] and "cut off" in d.problems[0].message


def test_nccl_warning_is_withdrawn_when_loading_goes_on():
    d = Diagnoser("vllm")
    d.feed("spark1:1:1 [0] NCCL WARN NET/IB : Got async event : port active")
    assert kinds(d) == ["nccl_error"]
    d.feed("(Worker_TP0 pid=290) INFO 03-03 09:12:25 [gpu_model_runner.py:2602] Starting to load model /m...")
    assert d.problems == [] and d.state == "loading"


def test_model_path_not_found_in_plain_os_error():
    d = Diagnoser("vllm", model_path="/models/q")
    d.feed("FileNotFoundError: [Errno 2] No such file or directory: '/models/q/config.json'")
    assert kinds(d) == ["model_not_found"]


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError):
        Diagnoser("tgi")


# ---- the command --------------------------------------------------------------------------------


def test_cli_json_for_a_ready_log(capsys):
    assert main(["diagnose", "--json", str(T / "vllm_ray_ready.log")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"engine", "ready", "state", "milestones", "problems", "nodes"}
    assert out["engine"] == "vllm" and out["ready"] is True and out["problems"] == []


def test_cli_json_for_a_problem_log(capsys):
    assert main(["diagnose", "--engine", "sglang", "--json", str(T / "sglang_hang_cut.log")]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "hung"
    assert set(out["problems"][0]) >= {"kind", "line", "message", "hint"}


def test_cli_reads_stdin_and_prints_text(capsys, monkeypatch):
    text = (T / "vllm_port_in_use.log").read_text(encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["diagnose", "-"]) == 1
    out = capsys.readouterr().out
    assert "port in use" in out and "port_in_use" not in out and "hint" in out  # the kind in words


def test_cli_bad_input_exits_2(capsys, tmp_path):
    assert main(["diagnose", str(tmp_path / "missing.log")]) == 2
    (tmp_path / "x.log").write_text("nothing to see\n")
    assert main(["diagnose", str(tmp_path / "x.log")]) == 2


def test_live_silence_and_a_saved_log_that_stops_name_the_same_phase_and_rank():
    lines = (T / "sglang_hang_cut.log").read_text(encoding="utf-8").splitlines()
    live = Diagnoser("sglang", hang_after=90)
    for i, line in enumerate(lines):
        live.feed(line, node="spark1", now=1000.0 + i)
    (hang,) = live.tick(1000.0 + len(lines) + 90)
    saved = run("sglang_hang_cut.log")
    (stop,) = saved.problems
    assert hang.kind == "rendezvous_hang" and stop.kind == "stopped"
    assert (hang.phase, hang.rank) == (stop.phase, stop.rank) == ("nccl_init", 0)


def test_a_rank_waiting_for_a_node_that_has_not_reached_the_rendezvous_is_not_hung_yet():
    d = Diagnoser("sglang", hang_after=90, expect=["spark1", "spark2"])
    d.feed("[2026-03-02 10:14:12 TP1] Init torch distributed begin.", node="spark2", now=1000.0)
    assert d.tick(1000.0 + 89 * 10) == []  # spark1 (the head) is not there yet: the rendezvous waits for it
    d.feed("[2026-03-02 10:29:00] server_args=ServerArgs(model_path='/m')", node="spark1", now=1895.0)
    d.feed("[2026-03-02 10:29:01 TP0] Init torch distributed begin.", node="spark1", now=1896.0)
    assert d.tick(1896.0 + 89) == []  # both in init: silence counts from the last arrival
    hangs = d.tick(1896.0 + 90)
    assert {p.node for p in hangs} == {"spark1", "spark2"} and {p.kind for p in hangs} == {"rendezvous_hang"}


def test_a_node_that_never_reaches_the_rendezvous_still_ends_the_wait():
    d = Diagnoser("sglang", hang_after=90, expect=["spark1", "spark2"])
    d.feed("[2026-03-02 10:14:12 TP1] Init torch distributed begin.", node="spark2", now=1000.0)
    (p,) = d.tick(1000.0 + 900)
    assert p.kind == "rendezvous_hang" and p.node == "spark2"


@pytest.mark.parametrize("engine,host_var", [("sglang", "SGLANG_HOST_IP"), ("vllm", "VLLM_HOST_IP")])
def test_a_hang_hint_the_plan_already_satisfies_gives_way_to_the_next_cause(engine, host_var):
    begin = (
        "[2026-03-02 10:14:12 TP0] Init torch distributed begin."
        if engine == "sglang"
        else "INFO 03-02 10:14:12 [core.py:1] Initializing a V1 LLM engine (v0.11.0) with config"
    )

    def hung(env_set):
        d = Diagnoser(engine, hang_after=90, env_set=env_set)
        d.feed(begin, node="spark2", now=1000.0)
        (p,) = d.tick(1100.0)
        assert p.kind == "rendezvous_hang"
        return p.hint

    plain = hung(())
    assert f"{host_var} must be" in plain  # nothing known about the plan: ask for the variables
    set_all = hung({host_var, "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA"})
    assert f"{host_var} must be" not in set_all and "already set" in set_all
    assert "firewall" in set_all and "sparktui preflight" in set_all
    # one of them missing: the plain hint still applies
    assert hung({host_var, "NCCL_SOCKET_IFNAME"}) == plain


def test_a_worker_that_reaches_the_gcs_late_is_not_a_failed_launch():
    # under load the head's GCS came up after the worker's first 5 s of tries: the launch was failed at
    # once, though the hint says it is normal for the first minute and the worker joined seconds later
    d = Diagnoser("vllm")
    d.feed(
        "[2026-12-06 04:27:01,100 W 52 52] rpc_client.h:153: Failed to connect to GCS at address "
        "127.0.1.11:6379 within 5 seconds.",
        node="spark2",
    )
    assert kinds(d) == ["ray_connect"] and d.state == "starting"
    d.feed("Ray runtime started.", node="spark2")
    assert d.problems == [] and d.state == "starting"
    # a failure beside it still fails the launch
    d.feed(
        "[2026-12-06 04:28:01,100 W 52 52] rpc_client.h:153: Failed to connect to GCS at address "
        "127.0.1.11:6379 within 5 seconds.",
        node="spark2",
    )
    d.feed("torch.OutOfMemoryError: CUDA out of memory.", node="spark1")
    assert d.state == "failed"
