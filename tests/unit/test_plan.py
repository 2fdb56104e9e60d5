"""Plans for each engine and mode on 2, 3, 4 and 8 synthetic nodes, checked against REFERENCE.md's recipes.

Commands are parsed with shlex.split and checked flag by flag; the builders here make synthetic
NodeFacts and Subnets and are shared with the other test_plan_* files.
"""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from sparktui.core.config.config import Config
from sparktui.core.engines.vllm import count_ray_nodes
from sparktui.core.nodes.facts import DockerInfo, Gpu, Interface, Memory, ModelDir, NodeAddr, NodeFacts, Subnet
from sparktui.core.plan.plan import PlanOptions, make_plan

from tests.configs import MODEL, make_config, node_name

GIB = 1024**3
SGLANG_IMAGE = "lmsysorg/sglang:latest-cu130"  # the default (config.ImagesConfig)
VLLM_IMAGE = "nvcr.io/nvidia/vllm:26.10-py3"
IMAGE_ID = "sha256:" + "ab" * 32
# Twins of one ConnectX port carry different names on different nodes; the plan must follow each node's.
FABRIC_NAMES = ["enp1s0f1np1", "enP2p1s0f1np1", "enp1s0f0np0", "enP2p1s0f0np0"]


def fabric_ip(i: int) -> str:
    return f"192.168.100.{10 + i}"


def make_facts(
    i: int,
    *,
    gpus: int = 1,
    mem: int | None = 128 * GIB,
    model_bytes: int | None = 118 * GIB,
    present: bool = True,
    ib: bool = True,
    rdma: str | None = "rocep1s0f1",
    images: dict | None = None,
) -> NodeFacts:
    iface = FABRIC_NAMES[i % len(FABRIC_NAMES)]
    f = NodeFacts(name=node_name(i), host=f"10.0.0.{11 + i}", reachable=True)
    f.gpu = Gpu(name="NVIDIA GB10", count=gpus, unified=True)
    f.memory = Memory(total_bytes=mem, available_bytes=mem)
    f.interfaces = [
        Interface("enP7s7", [f"10.0.0.{11 + i}/24"], True, None, 10000),
        Interface(iface, [f"{fabric_ip(i)}/24"], True, rdma, 200000),
    ]
    f.docker = DockerInfo("28.3.1", images if images is not None else {SGLANG_IMAGE: IMAGE_ID, VLLM_IMAGE: IMAGE_ID})
    f.model = ModelDir(MODEL, present, model_bytes, 40)
    f.infiniband = ib
    return f


def make_subnets(facts: dict[str, NodeFacts]) -> list[Subnet]:
    """The fabric first (RDMA), then the management network, as network.subnets ranks them."""
    fabric = Subnet("192.168.100.0/24", rdma=all(f.interfaces[1].rdma for f in facts.values()), speed_mbps=200000)
    mgmt = Subnet("10.0.0.0/24", management=True, speed_mbps=10000)
    for f in facts.values():
        fi, mi = f.interfaces[1], f.interfaces[0]
        fabric.nodes[f.name] = NodeAddr(fi.name, fi.ipv4[0].split("/")[0], fi.rdma)
        mgmt.nodes[f.name] = NodeAddr(mi.name, mi.ipv4[0].split("/")[0], None)
    return [fabric, mgmt]


def cluster(n: int, config: Config | None = None, **fact_opts):
    config = config or make_config(n)
    facts = {node_name(i): make_facts(i, **fact_opts) for i in range(n)}
    return config, facts, make_subnets(facts)


def plan_for(n: int, **opts):
    config, facts, subnets = cluster(n)
    return make_plan(config, facts, subnets, PlanOptions(**opts)), facts


# docker run options that take a value (everything the plan may emit)
_DOCKER_VALUE = {
    "--name",
    "--label",
    "--network",
    "--ipc",
    "--gpus",
    "--runtime",
    "--ulimit",
    "--cap-add",
    "--device",
    "-v",
    "--shm-size",
    "-e",
    "--entrypoint",
}


def parse_run(argv: list[str]) -> dict:
    """A `docker run` argv taken apart: flags, labels, env, volumes, image and the container command."""
    assert argv[:2] == ["docker", "run"]
    out = {"flags": [], "labels": {}, "env": {}, "volumes": [], "devices": [], "ulimits": {}, "caps": []}
    i = 2
    while argv[i].startswith("-"):
        flag = argv[i]
        if flag in _DOCKER_VALUE:
            val = argv[i + 1]
            i += 2
            if flag == "--label":
                k, _, v = val.partition("=")
                out["labels"][k] = v
            elif flag == "-e":
                k, eq, v = val.partition("=")
                out["env"][k] = v if eq else None
            elif flag == "-v":
                out["volumes"].append(val)
            elif flag == "--device":
                out["devices"].append(val)
            elif flag == "--ulimit":
                k, _, v = val.partition("=")
                out["ulimits"][k] = v
            elif flag == "--cap-add":
                out["caps"].append(val)
            else:
                out[flag] = val
        else:
            out["flags"].append(flag)
            i += 1
    out["image"] = argv[i]
    # what the container runs: the entrypoint the plan names, then the command after the image
    out["cmd"] = ([out["--entrypoint"]] if "--entrypoint" in out else []) + argv[i + 1 :]
    return out


def flags(cmd: list[str]) -> dict:
    """`--flag value` / `--flag` pairs of an engine command (values never start with '-')."""
    out: dict = {}
    i = 0
    while i < len(cmd):
        if cmd[i].startswith("-"):
            if i + 1 < len(cmd) and not cmd[i + 1].startswith("-"):
                out[cmd[i]] = cmd[i + 1]
                i += 2
                continue
            out[cmd[i]] = True
        i += 1
    return out


def check_common_run(run: dict, plan, facts, name: str, rank: int) -> None:
    """What every engine container gets: REFERENCE.md 'Docker on the nodes' and 'Rendezvous'."""
    f = facts[name]
    iface = f.interfaces[1].name
    assert run["--name"] == f"sparktui-sparks-{plan.engine}-{rank}"
    assert run["labels"] == {
        "sparktui.deployment": "sparks",
        "sparktui.engine": plan.engine,
        "sparktui.role": "head" if rank == 0 else "worker",
        "sparktui.rank": str(rank),
        "sparktui.plan": plan.plan_id,
    }
    assert "-d" in run["flags"]
    assert run["--network"] == "host" and run["--ipc"] == "host" and run["--gpus"] == "all"
    assert run["ulimits"] == {"memlock": "-1", "stack": "67108864"}
    assert run["caps"] == ["IPC_LOCK"]
    assert run["devices"] == ["/dev/infiniband"]
    assert f"{MODEL}:{MODEL}:ro" in run["volumes"]
    for k in (
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
        "TP_SOCKET_IFNAME",
        "UCX_NET_DEVICES",
        "OMPI_MCA_btl_tcp_if_include",
    ):
        assert run["env"][k] == iface, k
    assert run["env"]["NCCL_IB_HCA"] == "rocep1s0f1"
    assert run["env"]["NCCL_IB_DISABLE"] == "0"


NODE_COUNTS = [2, 3, 4, 8]


@pytest.mark.parametrize("n", NODE_COUNTS)
@pytest.mark.parametrize(
    "version,program",
    [
        (None, ["sglang", "serve"]),
        ("0.5.5", ["sglang", "serve"]),
        ("0.5.4.post3", ["python3", "-m", "sglang.launch_server"]),
    ],
)
def test_sglang_every_rank_same_command_workers_first(n, version, program):
    plan, facts = plan_for(n, engine="sglang", engine_version=version)
    assert plan.ok, plan.errors
    assert [s.kind for s in plan.steps] == ["run"] * n
    # workers first, head last
    assert [s.rank for s in plan.steps] == list(range(1, n)) + [0]
    head_ip = fabric_ip(0)
    for step in plan.steps:
        run = parse_run(step.argv)
        check_common_run(run, plan, facts, step.node, step.rank)
        assert run["env"]["SGLANG_HOST_IP"] == fabric_ip(step.rank)
        assert run["image"] == SGLANG_IMAGE
        assert run["cmd"][: len(program)] == program  # `sglang serve` from the release that has the command
        fl = flags(run["cmd"][len(program) :])
        assert fl["--model-path"] == MODEL
        assert fl["--tp"] == str(n) and "--pp-size" not in fl
        assert fl["--nnodes"] == str(n) and fl["--node-rank"] == str(step.rank)
        assert fl["--dist-init-addr"] == f"{head_ip}:29500"
        assert fl["--host"] == "0.0.0.0" and fl["--port"] == "30000"
        assert fl["--mem-fraction-static"] == "0.75"  # NVIDIA's Spark examples
        assert fl["--served-model-name"] == "qwen3.5-122b"
        assert fl["--enable-metrics"] is True  # /metrics for the serving view


@pytest.mark.parametrize("n", NODE_COUNTS)
def test_vllm_ray_head_first_then_wait_then_serve_in_head(n):
    plan, facts = plan_for(n, engine="vllm", mode="ray")
    assert plan.ok, plan.errors
    assert [s.kind for s in plan.steps] == ["run"] * n + ["wait", "exec", "exec"]
    runs = plan.steps[:n]
    assert [s.rank for s in runs] == list(range(n))  # head first: workers join its GCS
    head_ip = fabric_ip(0)
    head_c = "sparktui-sparks-vllm-0"
    for step in runs:
        run = parse_run(step.argv)
        check_common_run(run, plan, facts, step.node, step.rank)
        assert run["image"] == VLLM_IMAGE
        assert run["env"]["VLLM_HOST_IP"] == fabric_ip(step.rank)
        # Ray reads no node-IP variable (checked in tests/contract): --node-ip-address carries it
        assert "RAY_NODE_IP_ADDRESS" not in run["env"]
        assert run["env"]["MASTER_ADDR"] == head_ip
        assert run["env"]["RAY_memory_monitor_refresh_ms"] == "0"  # it kills TP workers on unified memory
        assert run["cmd"][:3] == ["ray", "start", "--block"]
        fl = flags(run["cmd"][3:])
        if step.rank == 0:
            assert fl == {"--head": True, "--node-ip-address": head_ip, "--port": "6379"}
        else:
            assert fl == {"--address": f"{head_ip}:6379", "--node-ip-address": fabric_ip(step.rank)}
    wait, keep, serve = plan.steps[n], plan.steps[n + 1], plan.steps[n + 2]
    assert wait.node == keep.node == serve.node == "spark1"
    # before serve: each node's interface variables are listed so vLLM does not copy the head's to workers
    assert (
        keep.argv[:5] == ["docker", "exec", head_c, "sh", "-c"] and "ray_non_carry_over_env_vars.json" in keep.argv[5]
    )
    assert "NCCL_SOCKET_IFNAME" in keep.argv[5] and "VLLM_CONFIG_ROOT" in keep.argv[5]
    assert wait.argv == ["docker", "exec", head_c, "ray", "status"]
    assert wait.timeout and wait.timeout > 0
    argv = serve.argv
    assert argv[:3] == ["docker", "exec", "-d"]
    assert argv[3:5] == ["-e", f"RAY_ADDRESS={head_ip}:6379"]
    assert argv[5:8] == [head_c, "sh", "-c"] and len(argv) == 9
    inner = shlex.split(argv[8])
    # the serve output goes to PID 1's streams, so `docker logs` shows it
    assert inner[-2:] == [">/proc/1/fd/1", "2>/proc/1/fd/2"]
    assert inner[:3] == ["vllm", "serve", MODEL]
    fl = flags(inner[3:-2])
    assert fl["--tensor-parallel-size"] == str(n) and "--pipeline-parallel-size" not in fl
    assert fl["--distributed-executor-backend"] == "ray"
    assert fl["--host"] == "0.0.0.0" and fl["--port"] == "8000"
    assert fl["--gpu-memory-utilization"] == "0.8"  # NVIDIA's Spark examples


@pytest.mark.parametrize("n", NODE_COUNTS)
def test_vllm_native_ranks_headless_workers(n):
    plan, facts = plan_for(n, engine="vllm", mode="native")
    assert plan.ok, plan.errors
    head_ip = fabric_ip(0)
    # NVIDIA's recipes: every worker started, each waited for until it dials the head, the head last
    workers = range(1, n)
    assert [(s.kind, s.rank) for s in plan.steps] == (
        [("run", r) for r in workers] + [("wait", r) for r in workers] + [("run", 0)]
    )
    for step in plan.steps:
        if step.kind == "wait":
            assert step.node == node_name(step.rank) and step.node in step.description
            assert step.argv[-2] == plan.nodes[step.rank].container
            assert step.timeout and step.matches("dialing") and not step.matches("exited")
            continue
        run = parse_run(step.argv)
        check_common_run(run, plan, facts, step.node, step.rank)
        assert run["env"]["VLLM_HOST_IP"] == fabric_ip(step.rank)
        assert "RAY_NODE_IP_ADDRESS" not in run["env"]
        assert run["cmd"][:3] == ["vllm", "serve", MODEL]
        fl = flags(run["cmd"][3:])
        assert fl["--tensor-parallel-size"] == str(n)
        assert fl["--nnodes"] == str(n) and fl["--node-rank"] == str(step.rank)
        assert fl["--master-addr"] == head_ip and fl["--master-port"] == "29500"
        assert run["cmd"].count("--master-addr") == 1 and run["env"]["MASTER_ADDR"] == head_ip
        if step.rank == 0:
            assert "--headless" not in fl and fl["--host"] == "0.0.0.0" and fl["--port"] == "8000"
        else:
            assert fl["--headless"] is True and "--port" not in fl


@pytest.mark.parametrize("engine,mode", [("sglang", None), ("vllm", "ray"), ("vllm", "native")])
def test_interfaces_follow_each_node(engine, mode):
    plan, facts = plan_for(4, engine=engine, mode=mode)
    names = {n.name: n.iface for n in plan.nodes}
    assert names == {node_name(i): FABRIC_NAMES[i] for i in range(4)}
    assert len(set(names.values())) == 4


def test_pp_flags_and_tp_split():
    plan, _ = plan_for(4, engine="sglang", tp=2, pp=2)
    assert plan.ok, plan.errors
    fl = flags(parse_run(plan.steps[0].argv)["cmd"][3:])
    assert fl["--tp"] == "2" and fl["--pp-size"] == "2"
    plan, _ = plan_for(4, engine="vllm", mode="ray", tp=2, pp=2)
    inner = shlex.split(plan.steps[-1].argv[-1])
    fl = flags(inner[3:-2])
    assert fl["--tensor-parallel-size"] == "2" and fl["--pipeline-parallel-size"] == "2"


def test_optional_engine_flags():
    plan, _ = plan_for(
        2, engine="sglang", max_model_len=131072, extra_args=["--attention-backend", "triton"], trust_remote_code=True
    )
    cmd = parse_run(plan.steps[0].argv)["cmd"]
    fl = flags(cmd[3:])
    assert fl["--context-length"] == "131072"
    assert fl["--trust-remote-code"] is True
    assert cmd[-2:] == ["--attention-backend", "triton"]
    plan, _ = plan_for(2, engine="vllm", mode="native", max_model_len=4096)
    fl = flags(parse_run(plan.steps[0].argv)["cmd"][3:])
    assert fl["--max-model-len"] == "4096"


def _ray_status(active: int, idle: int = 0) -> str:
    ids = [f"{i:056x}" for i in range(1, active + idle + 1)]
    lines = [
        "======== Autoscaler status: 2026-03-02 11:03:00.124353 ========",
        "Node status",
        "---------------------------------------------------------------",
        "Active:",
    ]
    lines += [f" 1 node_{x}" for x in ids[:active]] or [" (no active nodes)"]
    if idle or active == 0:
        lines += ["Idle:"] + ([f" 1 node_{x}" for x in ids[active:]] or [" (no idle nodes)"])
    lines += [
        "Pending:",
        " (no pending nodes)",
        "Recent failures:",
        " (no failures)",
        "",
        "Resources",
        "---------------------------------------------------------------",
        "Usage:",
        f" 0.0/{20 * (active + idle)}.0 CPU",
        f" 0.0/{active + idle}.0 GPU",
        "",
        "Demands:",
        " (no resource demands)",
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("n", [2, 4])
def test_ray_wait_counts_live_nodes(n):
    plan, _ = plan_for(n, engine="vllm", mode="ray")
    wait = plan.steps[n]
    assert not wait.matches(_ray_status(n - 1))
    assert wait.matches(_ray_status(n))
    # Ray 2.8+ lists nodes running nothing under "Idle:"; they count
    assert wait.matches(_ray_status(1, idle=n - 1))
    assert not wait.matches("Failed to connect to GCS at address 192.168.100.10:6379\n")
    assert count_ray_nodes(_ray_status(3, idle=2)) == 5
    # the pattern exported scripts give to `grep -cE` counts the same lines
    text = _ray_status(1, idle=n - 1)
    r = subprocess.run(["grep", "-cE", wait.expect_ere], input=text, capture_output=True, text=True, timeout=10)
    assert r.stdout.strip() == str(n)


def test_labels_share_one_plan_id_and_it_is_stable():
    a, _ = plan_for(2, engine="sglang")
    b, _ = plan_for(2, engine="sglang")
    c, _ = plan_for(2, engine="sglang", mem_fraction=0.8)
    assert re.fullmatch(r"[0-9a-f]{12}", a.plan_id)
    assert a.plan_id == b.plan_id and a.plan_id != c.plan_id
    ids = {parse_run(s.argv)["labels"]["sparktui.plan"] for s in a.steps}
    assert ids == {a.plan_id}
