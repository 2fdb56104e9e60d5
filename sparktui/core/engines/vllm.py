"""vLLM multi-node, two ways.

ray (NVIDIA's playbook, vLLM's run_cluster.sh): every node runs a container whose main process is
`ray start --block`; the head first, since workers join its GCS. Once `ray status` lists every node,
`vllm serve --distributed-executor-backend ray` runs inside the head container.

native (newer vLLM, no Ray): every node runs `vllm serve --nnodes N --node-rank R --master-addr HEAD`;
ranks > 0 add --headless and serve no API. Rank 0 owns the torch.distributed store at
--master-addr:--master-port and the others dial it, retrying until the init timeout, so neither
order is strictly required; vLLM's docs start the head first, and so do we. Each worker first
waits until it can reach that port: this proves the rendezvous path before anything loads.
"""
from __future__ import annotations

import json
import re
import shlex

from .common import HOST_ALL, Break, Context, ExportOnly, Nested, Spot, Step, Word, docker_run, make_step, opt, secrets_in

NAME = "vllm"
MODES = ("ray", "native")
HEALTH_PATHS = ("/health", "/v1/models")
READY_LINE = "Application startup complete."

# `ray status` lists live nodes as " 1 node_<hex>" under "Active:" (and, since Ray 2.8, "Idle:" for
# nodes running nothing); pending nodes and failures have no such line, so counting them is enough.
RAY_NODE_LINE = r"^[ \t]+\d+[ \t]+node_[0-9a-f]+[ \t]*$"
RAY_NODE_LINE_ERE = "^[[:space:]]+[0-9]+[[:space:]]+node_[0-9a-f]+[[:space:]]*$"
RAY_WAIT_S = 300.0  # "Failed to connect to GCS" is normal for the first minute
PORT_WAIT_S = 600.0  # rank 0 opens the store before loading weights, after its API server and engine start
# The serve process is not the container's PID 1: send its output to PID 1's streams so `docker logs` has it.
TO_CONTAINER_LOG = " >/proc/1/fd/1 2>/proc/1/fd/2"


def count_ray_nodes(status: str) -> int:
    """Live nodes in `ray status` output."""
    return len(re.findall(RAY_NODE_LINE, status, re.M))


def node_env(ctx: Context, spot: Spot) -> dict[str, str]:
    env: dict[str, str] = {}
    if spot.ip:
        env["VLLM_HOST_IP"] = spot.ip
    if ctx.head_ip:
        env["MASTER_ADDR"] = ctx.head_ip
    if ctx.mode == "ray":
        # Ray's memory monitor reads unified memory as full and kills tensor-parallel workers
        # (NVIDIA's DGX Spark playbooks turn it off the same way).
        env["RAY_memory_monitor_refresh_ms"] = "0"
    return env


# Set per node by the plan; vLLM's Ray executor copies the driver's NCCL_*/UCX_*/VLLM_* (and its own
# registered variables) to every worker unless listed in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json,
# which would give every worker the head's interface names.
PER_NODE_ENV = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "UCX_NET_DEVICES", "GLOO_SOCKET_IFNAME",
                "TP_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include", "VLLM_HOST_IP")
NON_CARRY_OVER_FILE = "ray_non_carry_over_env_vars.json"


def non_carry_over_script() -> str:
    """Shell that writes the list where vLLM looks (VLLM_CONFIG_ROOT, default $XDG_CONFIG_HOME/vllm)."""
    names = json.dumps(list(PER_NODE_ENV))
    return ('d="${VLLM_CONFIG_ROOT:-${XDG_CONFIG_HOME:-$HOME/.config}/vllm}" && mkdir -p "$d" && '
            f"printf '%s\\n' {shlex.quote(names)} > \"$d/{NON_CARRY_OVER_FILE}\"")


def _engine_flags(ctx: Context) -> list[Word]:
    w: list[Word] = ["--tensor-parallel-size", str(ctx.tp)]
    if ctx.pp > 1:
        w += ["--pipeline-parallel-size", str(ctx.pp)]
    return w


def _tuning(ctx: Context) -> list[Word]:
    w: list[Word] = []
    w += opt("--gpu-memory-utilization", ctx.mem_fraction)
    w += opt("--max-model-len", ctx.max_model_len)
    w += opt("--served-model-name", ctx.served_name)
    if ctx.trust_remote_code:
        w.append("--trust-remote-code")
    return w + list(ctx.extra_args)


def serve_words_ray(ctx: Context) -> list[Word]:
    return (["vllm", "serve", ctx.model_path] + _engine_flags(ctx)
            + ["--distributed-executor-backend", "ray", "--host", HOST_ALL, "--port", str(ctx.port)]
            + _tuning(ctx))


def serve_words_native(ctx: Context, spot: Spot) -> list[Word]:
    w: list[Word] = ["vllm", "serve", ctx.model_path] + _engine_flags(ctx)
    w += ["--nnodes", str(len(ctx.nodes)), "--node-rank", str(spot.rank),
          "--master-addr", ctx.head_ip, "--master-port", str(ctx.dist_port)]
    w += ["--host", HOST_ALL, "--port", str(ctx.port)] if spot.rank == 0 else ["--headless"]
    return w + _tuning(ctx)


def ray_start_words(ctx: Context, spot: Spot) -> list[Word]:
    if spot.rank == 0:
        return ["ray", "start", "--block", "--head", "--node-ip-address", ctx.head_ip,
                "--port", str(ctx.ray_port)]
    return ["ray", "start", "--block", "--address", f"{ctx.head_ip}:{ctx.ray_port}",
            "--node-ip-address", spot.ip or ""]


def steps_ray(ctx: Context) -> list[Step]:
    head = ctx.head
    hc = ctx.container(head)
    out = []
    # Head first: workers join the GCS it starts.
    for spot in [head] + ctx.workers:
        what = "Ray head" if spot.rank == 0 else "Ray worker"
        out.append(make_step(spot.name, spot.rank, "run", docker_run(ctx, spot, ray_start_words(ctx, spot)),
                             f"start the {what} container (rank {spot.rank})", ctx.container(spot)))
    n = len(ctx.nodes)
    out.append(make_step(head.name, 0, "wait", ["docker", "exec", hc, "ray", "status"],
                         f"wait until `ray status` lists {n} node(s)", hc,
                         expect=RAY_NODE_LINE, expect_ere=RAY_NODE_LINE_ERE, expect_count=n,
                         timeout=RAY_WAIT_S))
    out.append(make_step(head.name, 0, "exec", ["docker", "exec", hc, "sh", "-c", non_carry_over_script()],
                         "keep each node's interface variables on its own Ray workers", hc))
    inner = serve_words_ray(ctx)
    # RAY_ADDRESS makes vllm join this cluster; without it a missing cluster shows up as "Started a local Ray instance".
    exec_words: list[Word] = ["docker", "exec", "-d", "-e", f"RAY_ADDRESS={ctx.head_ip}:{ctx.ray_port}"]
    for s in secrets_in(inner):
        exec_words.append(ExportOnly(("-e", s.name)))
    exec_words += [Break(), hc, "sh", "-c", Nested(tuple(inner), TO_CONTAINER_LOG)]
    out.append(make_step(head.name, 0, "exec", exec_words,
                         "start vllm serve in the head container (Ray executor, serves HTTP)", hc))
    return out


def port_wait_words(host: str, port: int) -> list[Word]:
    """Succeeds (prints `open`) once host:port accepts TCP; bash's /dev/tcp needs no extra tool."""
    return ["timeout", "5", "bash", "-c", ': </dev/tcp/"$1"/"$2" && echo open', "rendezvous", host, str(port)]


def steps_native(ctx: Context) -> list[Step]:
    head = ctx.head
    out = [make_step(head.name, 0, "run", docker_run(ctx, head, serve_words_native(ctx, head)),
                     "start vllm serve rank 0 (head, serves HTTP)", ctx.container(head))]
    for spot in ctx.workers:
        out.append(make_step(spot.name, spot.rank, "wait", port_wait_words(ctx.head_ip, ctx.dist_port),
                             f"wait until {ctx.head_ip}:{ctx.dist_port} answers from {spot.name}",
                             ctx.container(spot), expect=r"^open$", expect_ere="^open$", timeout=PORT_WAIT_S))
        out.append(make_step(spot.name, spot.rank, "run", docker_run(ctx, spot, serve_words_native(ctx, spot)),
                             f"start vllm serve rank {spot.rank} (headless)", ctx.container(spot)))
    return out


def steps(ctx: Context) -> list[Step]:
    return steps_ray(ctx) if ctx.mode == "ray" else steps_native(ctx)


# The serving benchmark client `sparktui bench` runs for every engine (core/bench/client.py): vLLM's own CLI
# subcommand (vllm/entrypoints/cli/benchmark/serve.py in 0.11.0, 0.31.0 and 0.33.0; the ssh and lab tiers run
# 0.31.0's, the release in config.example.yaml's image).
BENCH_CLIENT = ("vllm", "bench", "serve")
