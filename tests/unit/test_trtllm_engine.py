"""TensorRT-LLM's engine module: the MPI launch shape, per-node env, fit, and its plan through the registry."""

from __future__ import annotations

import shlex
import subprocess

import pytest
import yaml

from sparktui.core.config.config import DockerConfig
from sparktui.core.engines import ENGINES, trtllm
from sparktui.core.engines.common import Context, Secret, Spot

pytestmark = pytest.mark.unit

MODEL = "/models/Qwen3-235B-A22B-FP4"
IFACES = ["enp1s0f1np1", "enP2p1s0f1np1", "enp1s0f0np0", "enP2p1s0f0np0"]


def make_ctx(n: int = 2, **kw) -> Context:
    nodes = []
    for i in range(n):
        spot = Spot(
            name=f"spark{i + 1}",
            rank=i,
            role="head" if i == 0 else "worker",
            iface=IFACES[i % 4],
            ip=f"192.168.100.{10 + i}",
            rdma=f"rocep{i}s0f1",
            infiniband=True,
        )
        nodes.append(spot)
    args = dict(
        engine="trtllm",
        mode="mpi",
        image=trtllm.DEFAULT_IMAGE,
        model_path=MODEL,
        served_name=None,
        tp=n,
        pp=1,
        head_ip=nodes[0].ip,
        dist_port=0,
        port=trtllm.DEFAULT_PORT,
        ray_port=0,
        mem_fraction=None,
        max_model_len=None,
        trust_remote_code=False,
        extra_args=[],
        deployment="d",
        plan_id="p1",
        docker=DockerConfig(),
        nodes=nodes,
    )
    args.update(kw)
    ctx = Context(**args)
    for spot in ctx.nodes:
        spot.env = {**trtllm.interface_env(spot), **trtllm.node_env(ctx, spot)}
    return ctx


def env_of(argv: list[str]) -> dict[str, str]:
    out = {}
    for i, a in enumerate(argv):
        if a == "-e":
            k, _, v = argv[i + 1].partition("=")
            out[k] = v
    return out


def test_registered_as_the_third_engine_with_the_mpi_shape():
    e = ENGINES["trtllm"]
    assert list(ENGINES)[-1] == "trtllm" and e.shape("mpi") == "mpi" and e.default_port == trtllm.DEFAULT_PORT
    assert e.interface_env(make_ctx().head) == trtllm.interface_env(make_ctx().head)


def _plan(n=2, **opts):
    from tests.unit.test_plan import VLLM_IMAGE, plan_for

    return plan_for(n, engine="trtllm", tp=n, image=VLLM_IMAGE, **opts)[0]  # an image the nodes hold


def test_plan_runs_mpirun_on_the_head_with_each_nodes_own_interfaces_and_no_torch_socket_vars():
    plan = _plan(2)
    assert not plan.errors, plan.errors
    assert len({n.iface for n in plan.nodes}) == 2
    for node in plan.nodes:
        assert node.env["NCCL_SOCKET_IFNAME"] == node.iface and node.env["UCX_NET_DEVICES"].startswith(node.iface)
        assert node.env["OMPI_MCA_btl_tcp_if_include"] == node.iface
        assert not {"GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"} & set(node.env)
    last = plan.steps[-1]
    words = shlex.split(last.display)
    assert "mpirun" in last.display and "trtllm-serve" in last.display and last.node == plan.nodes[0].name
    assert "-np" in " ".join(words) and "--tp_size 2" in last.display
    # the config's model name differs from the directory's basename: said, not refused
    assert any("--served-model-name" in w for w in plan.warnings), plan.warnings


def test_plan_refuses_api_key_and_served_name_flags_and_tp_that_does_not_fill_the_nodes():
    assert any("--api-key" in e for e in _plan(2, extra_args=["--api-key", "sk-x"]).errors)
    assert any("--served-model-name" in e for e in _plan(2, extra_args=["--served-model-name=q"]).errors)
    from tests.unit.test_plan import plan_for

    bad = plan_for(2, engine="trtllm", tp=1, nodes=["spark1", "spark2"])[0]
    assert any("must equal the number of nodes" in e for e in bad.errors)


def test_plan_warns_when_the_release_is_older_than_the_playbooks():
    plan = _plan(2, engine_version="1.2.0rc6")
    assert any("older than 1.3.0rc5" in w for w in plan.warnings), plan.warnings
    assert not any("older than" in w for w in _plan(2, engine_version="1.3.0rc5").warnings)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_containers_first_workers_then_head_each_with_its_own_interfaces(n):
    ctx = make_ctx(n)
    steps = trtllm.steps(ctx)
    runs = [s for s in steps if s.kind == "run"]
    assert [s.rank for s in runs] == list(range(1, n)) + [0]
    for s in runs:
        argv = s.argv
        env = env_of(argv)
        spot = ctx.nodes[s.rank]
        for k in ("UCX_NET_DEVICES", "NCCL_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include"):
            assert env[k] == spot.iface
        assert env["NCCL_IB_HCA"] == spot.rdma
        assert not set(trtllm.NOT_READ) & set(env)
        assert env["OMPI_MCA_orte_default_hostfile"] == trtllm.HOSTFILE
        assert env["OMPI_MCA_rmaps_ppr_n_pernode"] == "1"
        assert f"-D -e -p {trtllm.SSH_PORT}" in argv[-1]
        assert "PermitUserEnvironment=yes" in argv[-1]  # the node's own env reaches the rank SSH starts
        assert "env > /root/.ssh/environment" in argv[-1]
        assert argv[argv.index("--entrypoint") + 1] == "sh"
        assert any(a.endswith(":/tmp/.ssh:ro") for a in argv)
        assert f"{MODEL}:{MODEL}:ro" in argv


def test_head_waits_for_every_worker_ssh_then_hostfile_then_mpirun():
    ctx = make_ctx(3)
    steps = trtllm.steps(ctx)
    tail = steps[3:]
    assert [s.kind for s in tail] == ["wait", "wait", "exec", "exec", "exec"]
    assert all(s.node == "spark1" for s in tail)
    assert [s.argv[-2] for s in tail[:2]] == ["192.168.100.11", "192.168.100.12"]
    assert all(s.argv[-1] == str(trtllm.SSH_PORT) and s.matches("open\n") for s in tail[:2])
    hostfile = tail[2].argv
    assert hostfile[-2:] == ["192.168.100.10\n192.168.100.11\n192.168.100.12\n", trtllm.HOSTFILE]


def test_mpirun_line_one_rank_per_node_and_serve_flags():
    ctx = make_ctx(2, mem_fraction=0.8, max_model_len=32768, trust_remote_code=True)
    start = trtllm.steps(ctx)[-1]
    argv = start.argv
    assert argv[:3] == ["docker", "exec", "-d"] and argv[4:6] == ["sh", "-c"]
    inner = shlex.split(argv[6].replace(trtllm.TO_CONTAINER_LOG, ""))
    assert inner[: inner.index("trtllm-llmapi-launch")] == [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        "2",
        "--hostfile",
        trtllm.HOSTFILE,
        "--map-by",
        "ppr:1:node",
        "--mca",
        "plm_rsh_args",
        f"-p {trtllm.SSH_PORT} -o StrictHostKeyChecking=accept-new -o BatchMode=yes",
    ]
    serve = inner[inner.index("trtllm-llmapi-launch") + 1 :]
    assert serve[:2] == ["trtllm-serve", MODEL]
    flags = dict(zip(serve[2::2], serve[3::2]))
    assert flags["--tp_size"] == "2" and flags["--pp_size"] == "1"
    assert flags["--host"] == "0.0.0.0" and flags["--port"] == "8355"
    assert flags["--kv_cache_free_gpu_memory_fraction"] == "0.8"
    assert flags["--max_seq_len"] == "32768"
    assert serve[-1] == "--trust_remote_code"
    # no interface variable is copied from the head with -x: each node keeps its own names
    assert "-x" not in inner


def test_secret_in_extra_env_goes_by_name_and_is_masked():
    tok = Secret("HF_TOKEN", "hf_very_secret_value")
    assert "-x" not in trtllm.mpirun_words(make_ctx(2, extra_args=["--revision", "main"]))
    ctx2 = make_ctx(2)
    ctx2.extra_args = ["--tokenizer", tok]
    start = trtllm.steps(ctx2)[-1]
    assert "hf_very_secret_value" not in start.display
    assert "HF_TOKEN" in start.secrets
    assert "-x HF_TOKEN" in start.command


def test_refusals_name_what_does_not_carry():
    ctx = make_ctx(2, served_name="my-model")
    why = trtllm.refusals(ctx, api_key="sk-1")
    assert any("--served-model-name" in w for w in why)
    assert any("--api-key" in w for w in why)
    assert trtllm.refusals(make_ctx(2, served_name="Qwen3-235B-A22B-FP4")) == []
    assert "one rank per node" in trtllm.refusals(make_ctx(2, tp=4))[0]


def test_served_name_is_the_directory_basename():
    assert trtllm.served_name("/models/Qwen3-235B-A22B-FP4/") == "Qwen3-235B-A22B-FP4"
    assert trtllm.served_name("nvidia/Qwen3-8B-FP4") == "Qwen3-8B-FP4"


def test_fit_fraction_is_of_free_memory_after_weights():
    assert trtllm.kv_bytes(40.0, 0.9) == pytest.approx(36.0)
    # vLLM at 0.85 of 120 GiB with 70 GiB weights leaves 32 GiB of KV: TRT-LLM needs 32/50 of what is free
    assert trtllm.kv_fraction_for(0.85, 120.0, 70.0) == pytest.approx(0.64)
    assert trtllm.kv_fraction_for(0.85, 120.0, 70.0, free=110.0) == pytest.approx(0.8)
    assert trtllm.kv_fraction_for(0.5, 120.0, 70.0) is None


# real line forms (docs/trtllm.md names the source of each)
LINES = {
    "rank_unreachable": "ssh: connect to host 192.168.100.11 port 2233: Connection refused",
    "engine_died": "mpirun detected that one or more processes exited with non-zero status, thus causing",
    "port_in_use": "RuntimeError: Failed to bind socket to 0.0.0.0:8355: [Errno 98] Address already in use",
    "bad_arguments": "Error: No such option: --served-model-name Did you mean --server_role?",
}


@pytest.mark.parametrize("kind,line", sorted(LINES.items()))
def test_failure_signs_match_the_real_lines(kind, line):
    hits = [s for s in trtllm.SIGNS if s.pattern.search(line)]
    assert hits and hits[0].kind == kind
    m = hits[0].pattern.search(line)
    assert "{" not in hits[0].message.format(*m.groups())


def test_progress_lines():
    p = trtllm.PROGRESS
    assert p["version"].search("[TensorRT-LLM] TensorRT LLM version: 1.3.0rc20").group(1) == "1.3.0rc20"
    assert p["version"].search("[TensorRT-LLM] TensorRT-LLM version: 1.2.0rc6").group(1) == "1.2.0rc6"
    mpi = p["mpi_rank"].search("[TensorRT-LLM][INFO] MPI size: 4, MPI local size: 4, rank: 2")
    assert mpi.groups() == ("4", "4", "2")
    assert p["ready"].search("INFO:     Application startup complete.")
    assert trtllm.IGNORE.search("UCX  WARN  network device 'enp1s0f0np0' is not available, please use one or more of")
    assert not any(s.pattern.search("UCX  WARN  network device 'enp1s0f0np0' is not available") for s in trtllm.SIGNS)
    kv = p["kv_cache"].search(
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache (8224)."
    )
    assert kv.groups() == ("0.56", "8224")


def test_release_order_and_note():
    k = trtllm.release_key
    assert k("1.2.0rc0") < k("1.2.0rc6") < k("1.2.0") < k("1.2.1") < k("1.3.0rc5") < k("1.3.0rc20") < k("1.3.0")
    assert k("not a version") is None
    assert trtllm.release_note("1.3.0rc5", 2) is None and trtllm.release_note("1.2.1", 1) is None
    assert trtllm.release_note(None, 2) is None  # unknown: nothing to say
    note = trtllm.release_note("1.2.0rc0", 2)
    assert "1.3.0rc5" in note and "#8474" in note
    assert "1.2.0rc6" in trtllm.release_note("1.2.0rc0", 1)


def test_prefilter_agrees_with_every_trtllm_pattern():
    # the quickre prefilter may only skip lines that cannot match (as tests/unit/test_quickre.py checks for logsigns)
    qs = [s.pattern for s in trtllm.SIGNS] + list(trtllm.PROGRESS.values()) + [trtllm.IGNORE]
    lines = set(LINES.values()) | {
        "[TensorRT-LLM] TensorRT-LLM version: 1.2.0rc6",
        "[TensorRT-LLM][INFO] MPI size: 2, MPI local size: 1, rank: 1",
        "rank0 run mgmn leader node with mpi_world_size: 2 ...",
        "UCX  WARN  network device 'x' is not available",
        "UCX  ERROR no such device",
        "Connection timed out during banner exchange",
        "INFO:     Application startup complete.",
    }
    lines |= {ln.upper() for ln in lines} | {ln.lower() for ln in lines}
    for q in qs:
        for ln in lines:
            assert bool(q.search(ln)) == bool(q.regex.search(ln)), (q, ln)


def test_the_head_gets_an_options_file_that_serves_prometheus_and_serve_reads_it(tmp_path):
    ctx = make_ctx(2)
    step = [s for s in trtllm.steps(ctx) if "LLM API options" in s.description][0]
    assert step.node == "spark1" and step.argv[:3] == ["docker", "exec", ctx.container(ctx.head)]
    argv = list(step.argv[3:])
    argv[-1] = str(tmp_path / "options.yaml")  # the container's /etc path, here
    subprocess.run(argv, check=True)
    assert yaml.safe_load((tmp_path / "options.yaml").read_text()) == {"return_perf_metrics": True}
    serve = trtllm.serve_words(ctx)
    assert serve[serve.index("--extra_llm_api_options") + 1] == trtllm.OPTIONS_FILE == step.argv[-1]
    assert trtllm.ENGINE.metrics_path == "/prometheus/metrics"


@pytest.mark.parametrize("flag", ["--config", "--extra_llm_api_options"])
def test_an_options_file_of_the_users_own_is_the_one_and_the_plan_says_what_metrics_need(flag):
    ctx = make_ctx(2, extra_args=[flag, "/models/mine.yaml"])
    assert not [s for s in trtllm.steps(ctx) if "LLM API options" in s.description]
    serve = trtllm.serve_words(ctx)
    assert trtllm.OPTIONS_FILE not in serve and serve[-2:] == [flag, "/models/mine.yaml"]
    assert any("return_perf_metrics: true" in w for w in trtllm.ENGINE.plan_warnings(ctx))
    assert not any("return_perf_metrics" in w for w in trtllm.ENGINE.plan_warnings(make_ctx(2)))


def test_hostfile_step_writes_the_hostfile_through_a_real_shell(tmp_path):
    import subprocess

    ctx = make_ctx(3)
    step = [s for s in trtllm.steps(ctx) if "hostfile" in s.description][0]
    argv = step.argv[step.argv.index("sh") :]
    argv[-1] = str(tmp_path / "openmpi-hostfile")  # the container's /etc path, here
    subprocess.run(argv, check=True, timeout=30)
    assert (tmp_path / "openmpi-hostfile").read_text() == trtllm.hostfile_text(ctx)
    assert trtllm.hostfile_text(ctx).splitlines() == [s.ip for s in ctx.nodes]


def test_describe_names_head_ranks_port_and_served_name():
    line = trtllm.describe(make_ctx(2))
    assert "mpirun on spark1 starts 2 ranks over SSH port 2233" in line
    assert "Qwen3-235B-A22B-FP4" in line and "8355" in line


def test_diagnosis_reads_a_trtllm_log_to_ready_and_names_an_unreachable_rank():
    from sparktui.core.diagnosis.diagnose import Diagnoser

    d = Diagnoser("trtllm", clock=lambda: 0.0)
    d.feed_lines(
        [
            "[TensorRT-LLM] TensorRT-LLM version: 1.3.0rc5",
            "[TensorRT-LLM][INFO] MPI size: 2, MPI local size: 1, rank: 0",
            "rank0 run mgmn leader node with mpi_world_size: 2",
            "INFO:     Application startup complete.",
        ],
        node="spark1",
    )
    assert d.state == "ready"
    bad = Diagnoser("trtllm", clock=lambda: 0.0)
    bad.feed_lines(["ssh: connect to host 192.168.100.11 port 2233: Connection timed out"], node="spark1")
    p = bad.problems[0]
    assert p.kind == "rank_unreachable" and "192.168.100.11" in p.message and "2233" in p.hint
    assert "OMPI_MCA_btl_tcp_if_include" in ENGINES["trtllm"].hang_hint()


def test_pivot_between_vllm_and_trtllm_keeps_model_tp_interface_and_context_and_names_the_rest():
    from sparktui.core.deploy.options import pivot_notes, pivot_options
    from sparktui.core.plan.plan import PlanOptions

    o = PlanOptions(
        engine="vllm",
        mode="ray",
        tp=2,
        max_model_len=4096,
        served_model_name="q",
        rendezvous="enp1",
        model_path=MODEL,
        extra_args=["--api-key", "sk", "--trust-remote-code"],
    )
    n = pivot_options(o, "trtllm")
    assert (n.engine, n.tp, n.max_model_len, n.rendezvous, n.model_path) == ("trtllm", 2, 4096, "enp1", MODEL)
    assert n.extra_args == ["--trust_remote_code"]
    notes = " | ".join(pivot_notes(o, "trtllm"))
    assert "--api-key: trtllm-serve has no --api-key" in notes and "the name the API serves (q)" in notes
    back = pivot_options(n, "vllm")
    assert (back.engine, back.tp, back.max_model_len, back.extra_args) == ("vllm", 2, 4096, ["--trust-remote-code"])
    assert not any("name the API serves" in x for x in pivot_notes(n, "vllm"))


def test_a_node_without_the_named_interface_gets_trtllms_own_hint_not_torchs():
    from sparktui.core.diagnosis.diagnose import Diagnoser

    d = Diagnoser("trtllm", clock=lambda: 0.0)
    d.feed_lines(
        [
            "spark2:12:12 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to nosuch0",
            "spark2:12:12 [0] NCCL WARN Bootstrap : no socket interface found",
        ],
        node="spark2",
    )
    [p] = [p for p in d.problems if p.kind == "nccl_error"]
    assert "OMPI_MCA_btl_tcp_if_include" in p.hint and "GLOO" not in p.hint
