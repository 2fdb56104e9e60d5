"""vLLM multi-node, two ways.

ray (NVIDIA's playbook, vLLM's run_cluster.sh): every node runs a container whose main process is
`ray start --block`; the head first, since workers join its GCS. Once `ray status` lists every node,
`vllm serve --distributed-executor-backend ray` runs inside the head container.

native (newer vLLM, no Ray): every node runs `vllm serve --nnodes N --node-rank R --master-addr HEAD`;
ranks > 0 add --headless and serve no API. Workers start first and the head last, as NVIDIA's Spark
recipes say ("start workers before the head"): a headless rank's torch store client retries its
connection to --master-addr:--master-port until its timeout (c10d socket.cpp: "not yet listening,
will retry"), and the head then finds every rank already dialing. Before the head starts, each worker
is waited for until it logs that it is dialing the head, or the wait gives up naming the node.
"""

from __future__ import annotations

import json
import re
import shlex

from ..diagnosis import quickre
from . import cpubuild
from .base import CommunityImage, Engine
from .logsigns import Sign
from ..state.states import Phase, ProblemKind as PK
from .versions import at_least
from .common import (
    HOST_ALL,
    Break,
    Context,
    ExportOnly,
    Nested,
    Spot,
    Step,
    Word,
    docker_run,
    make_step,
    opt,
    secrets_in,
)

NAME = "vllm"
MODES = ("ray", "native")
HEALTH_PATHS = ("/health", "/v1/models")
READY_LINE = "Application startup complete."

# `ray status` lists live nodes as " 1 node_<hex>" under "Active:" (and, since Ray 2.8, "Idle:" for
# nodes running nothing); pending nodes and failures have no such line, so counting them is enough.
RAY_NODE_LINE = r"^[ \t]+\d+[ \t]+node_[0-9a-f]+[ \t]*$"
RAY_NODE_LINE_ERE = "^[[:space:]]+[0-9]+[[:space:]]+node_[0-9a-f]+[[:space:]]*$"
RAY_WAIT_S = 300.0  # "Failed to connect to GCS" is normal for the first minute
# vllm/entrypoints/cli/serve.py run_headless (0.11.1 to 0.33.0) logs it just before the ranks dial the head:
# "Launching vLLM (v...) headless multiproc executor, with head node address H:P for torch.distributed ..."
HEADLESS_LINE = "headless multiproc executor"
RANK_WAIT_S = 300.0  # the line comes after vLLM's imports and the model's config: seconds to a minute
# The serve process is not the container's PID 1: send its output to PID 1's streams so `docker logs` has it.
TO_CONTAINER_LOG = " >/proc/1/fd/1 2>/proc/1/fd/2"

# vLLM's native multi-node flags (--nnodes, --node-rank, --master-addr, --master-port, --headless) first appear in
# vLLM 0.11.1's engine/arg_utils.py; 0.11.0 rejects them ("unrecognized arguments").
VLLM_NATIVE_SINCE = "0.11.1"
# `--kv-cache-memory-bytes` (the KV cache in bytes, not a share of GPU memory) first appears in vLLM 0.10.2's
# engine/arg_utils.py (0.10.1.1 has none); `--max-model-len auto` (-1: the longest context the KV cache holds)
# in 0.14.0, whose arg_utils.py parses it with human_readable_int_or_auto (0.13.0 does not)
VLLM_KV_BYTES_SINCE = "0.10.2"
VLLM_AUTO_LEN_SINCE = "0.14.0"


def vllm_native_refusal(version: str | None) -> str | None:
    """Why vLLM native mode cannot run on this release, with the way out; None when it can."""
    if version and not at_least(version, VLLM_NATIVE_SINCE):
        return (
            f"vLLM {version} in this image has no native multi-node mode (--nnodes/--headless came with "
            f"vLLM {VLLM_NATIVE_SINCE}): use --mode ray, or an image with vLLM {VLLM_NATIVE_SINCE} or newer"
        )
    return None


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
PER_NODE_ENV = (
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_IB_DISABLE",
    "UCX_NET_DEVICES",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "OMPI_MCA_btl_tcp_if_include",
    "VLLM_HOST_IP",
)
NON_CARRY_OVER_FILE = "ray_non_carry_over_env_vars.json"
# sparkrun 0.4.2 core/recipe.py _RAY_BACKEND_RE, and the eugr nightly image that marks its eugr builder
_RAY_BACKEND = re.compile(r"--distributed-executor-backend\s+ray\b")
EUGR_CONTAINER = "ghcr.io/spark-arena/dgx-vllm-eugr-nightly"


def non_carry_over_script() -> str:
    """Shell that writes the list where vLLM looks (VLLM_CONFIG_ROOT, default $XDG_CONFIG_HOME/vllm)."""
    names = json.dumps(list(PER_NODE_ENV))
    return (
        'd="${VLLM_CONFIG_ROOT:-${XDG_CONFIG_HOME:-$HOME/.config}/vllm}" && mkdir -p "$d" && '
        f"printf '%s\\n' {shlex.quote(names)} > \"$d/{NON_CARRY_OVER_FILE}\""
    )


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
    return (
        ["vllm", "serve", ctx.model_path]
        + _engine_flags(ctx)
        + ["--distributed-executor-backend", "ray", "--host", HOST_ALL, "--port", str(ctx.port)]
        + _tuning(ctx)
    )


def serve_words_native(ctx: Context, spot: Spot) -> list[Word]:
    w: list[Word] = ["vllm", "serve", ctx.model_path] + _engine_flags(ctx)
    w += [
        "--nnodes",
        str(len(ctx.nodes)),
        "--node-rank",
        str(spot.rank),
        "--master-addr",
        ctx.head_ip,
        "--master-port",
        str(ctx.dist_port),
    ]
    w += ["--host", HOST_ALL, "--port", str(ctx.port)] if spot.rank == 0 else ["--headless"]
    return w + _tuning(ctx)


def ray_start_words(ctx: Context, spot: Spot) -> list[Word]:
    if spot.rank == 0:
        return ["ray", "start", "--block", "--head", "--node-ip-address", ctx.head_ip, "--port", str(ctx.ray_port)]
    return ["ray", "start", "--block", "--address", f"{ctx.head_ip}:{ctx.ray_port}", "--node-ip-address", spot.ip or ""]


def steps_ray(ctx: Context) -> list[Step]:
    head = ctx.head
    hc = ctx.container(head)
    out = []
    # Head first: workers join the GCS it starts.
    for spot in [head] + ctx.workers:
        what = "Ray head" if spot.rank == 0 else "Ray worker"
        out.append(
            make_step(
                spot.name,
                spot.rank,
                "run",
                docker_run(ctx, spot, ray_start_words(ctx, spot)),
                f"start the {what} container (rank {spot.rank})",
                ctx.container(spot),
            )
        )
    n = len(ctx.nodes)
    out.append(
        make_step(
            head.name,
            0,
            "wait",
            ["docker", "exec", hc, "ray", "status"],
            f"wait until `ray status` lists {n} node(s)",
            hc,
            expect=RAY_NODE_LINE,
            expect_ere=RAY_NODE_LINE_ERE,
            expect_count=n,
            timeout=RAY_WAIT_S,
        )
    )
    out.append(
        make_step(
            head.name,
            0,
            "exec",
            ["docker", "exec", hc, "sh", "-c", non_carry_over_script()],
            "keep each node's interface variables on its own Ray workers",
            hc,
        )
    )
    inner = serve_words_ray(ctx)
    # RAY_ADDRESS makes vllm join this cluster; without it a missing cluster shows up as "Started a local Ray instance".
    exec_words: list[Word] = ["docker", "exec", "-d", "-e", f"RAY_ADDRESS={ctx.head_ip}:{ctx.ray_port}"]
    for s in secrets_in(inner):
        exec_words.append(ExportOnly(("-e", s.name)))
    exec_words += [Break(), hc, "sh", "-c", Nested(tuple(inner), TO_CONTAINER_LOG)]
    out.append(
        make_step(
            head.name, 0, "exec", exec_words, "start vllm serve in the head container (Ray executor, serves HTTP)", hc
        )
    )
    return out


def rank_wait_words(container: str) -> list[Word]:
    """Prints `dialing` once the headless rank logged that it dials the head; else the container's state
    (`exited` says it died), which the wait shows as its last answer."""
    script = 'docker logs "$1" 2>&1 | grep -q "$2" && echo dialing || docker inspect -f "{{.State.Status}}" "$1"'
    return ["sh", "-c", script, "rank-wait", container, HEADLESS_LINE]


def steps_native(ctx: Context) -> list[Step]:
    """Workers first (all started, then each waited for), the head last."""
    out = []
    for spot in ctx.workers:
        out.append(
            make_step(
                spot.name,
                spot.rank,
                "run",
                docker_run(ctx, spot, serve_words_native(ctx, spot)),
                f"start vllm serve rank {spot.rank} (headless)",
                ctx.container(spot),
            )
        )
    for spot in ctx.workers:
        c = ctx.container(spot)
        out.append(
            make_step(
                spot.name,
                spot.rank,
                "wait",
                rank_wait_words(c),
                f"wait until rank {spot.rank} on {spot.name} dials {ctx.head_ip}:{ctx.dist_port}",
                c,
                expect=r"^dialing$",
                expect_ere="^dialing$",
                timeout=RANK_WAIT_S,
            )
        )
    head = ctx.head
    out.append(
        make_step(
            head.name,
            0,
            "run",
            docker_run(ctx, head, serve_words_native(ctx, head)),
            "start vllm serve rank 0 (head, serves HTTP)",
            ctx.container(head),
        )
    )
    return out


def steps(ctx: Context) -> list[Step]:
    return steps_ray(ctx) if ctx.mode == "ray" else steps_native(ctx)


# -- the support check (core/plan/support.py): how to ask a vLLM image what it can load, run by its python3.
# vLLM's ModelRegistry imports on a CPU without loading a model class (vllm/model_executor/models/registry.py,
# get_supported_archs, 0.11.0 to 0.33.0); QUANTIZATION_METHODS in vllm/model_executor/layers/quantization;
# its own configs for model types transformers lacks: _CONFIG_REGISTRY in vllm/transformers_utils/config.py.
SUPPORT_PROBE = """
def registry_archs():
    from vllm.model_executor.models.registry import ModelRegistry
    return set(ModelRegistry.get_supported_archs())

def quant_methods():
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    return set(QUANTIZATION_METHODS)

def config_types():
    from vllm.transformers_utils.config import _CONFIG_REGISTRY
    return set(_CONFIG_REGISTRY)
"""
# The way out when this image's vLLM lacks an architecture: vLLM's own newest image (contract tier's newest).
SUPPORT_NEWER_IMAGE = "vllm/vllm-openai:v0.33.0 (vLLM 0.33.0)"


# The serving benchmark client `sparktui bench` runs for every engine (core/bench/client.py): vLLM's own CLI
# subcommand (vllm/entrypoints/cli/benchmark/serve.py in 0.11.0, 0.31.0 and 0.33.0; the ssh and lab tiers run
# 0.31.0's, the release in config.example.yaml's image).
BENCH_CLIENT = ("vllm", "bench", "serve")

# -- metrics: vLLM V1, vllm/v1/metrics/loggers.py (0.11.0, 0.31.0, 0.33.0): vllm:num_requests_running,
# vllm:num_requests_waiting, vllm:kv_cache_usage_perc (was vllm:gpu_cache_usage_perc, "Deprecated in 0.9.2",
# hidden in 0.11), Counters vllm:prompt_tokens and vllm:generation_tokens, Histograms
# vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds (new in 0.11, replacing
# vllm:time_per_output_token_seconds).
METRIC_SERIES = {
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "kv_cache_usage": "vllm:kv_cache_usage_perc",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
}
METRIC_RENAMED = (
    ("kv_cache_usage", "0.9.2", "vllm:gpu_cache_usage_perc"),
    ("itl", "0.11.0", "vllm:time_per_output_token_seconds"),
)

# -- its log lines (the engine-neutral ones are logsigns')
_q = quickre.compile  # a substring prefilter in front of each: every line is tried against them
SIGNS = (
    # Ray
    Sign(
        PK.RAY_RESOURCES,
        _q(r"The number of required GPUs exceeds the total number of available GPUs in the placement group"),
        message="Ray has fewer GPUs than TP x PP needs",
        hint="every node must have joined the Ray cluster (`ray status` lists N nodes / N GPUs) before vllm serve",
    ),
    Sign(
        PK.RAY_RESOURCES,
        _q(
            r"No available node types can fulfill resource request|Cannot provide a placement group|"
            r"pending placement groups?|Waiting for creating a placement group"
        ),
        message="Ray cannot place the workers",
        hint="check `ray status` in the head container lists every node and GPU",
    ),
    Sign(
        PK.RAY_RESOURCES,
        _q(r"Ray does not allocate any GPUs on the driver node"),
        message="Ray gave no GPU to the node running vllm serve",
        hint="run vllm serve inside the head container, on a node whose GPU is in the Ray cluster",
    ),
    Sign(
        PK.RAY_RESOURCES,
        _q(r"Current node has no GPU available"),
        message="Ray sees no free GPU on the node running vllm serve",
        hint="another job holds the GPUs in this Ray cluster, or the container was started without GPUs",
    ),
    Sign(
        PK.RAY_CONNECT,
        _q(r"Failed to connect to GCS|Unable to connect to GCS at (\S+)"),
        provisional=True,
        message="Ray cannot reach the head's GCS yet",
        hint="normal for the first minute; if it persists, the head IP/--ray-port is not reachable from this node",
    ),
    # Ray 2.60 `ray start` when --node-ip-address is not an address of this node: the raylet never
    # registers, and after ~30 s the CLI raises this (captured in the lab, tests/corpus/ray_worker_wrong_node_ip.log).
    Sign(
        PK.RAY_NODE_IP,
        _q(r"The current node timed out during startup"),
        message="this node's Ray did not come up (its raylet never registered with the GCS)",
        hint="--node-ip-address must be an address this node holds on the fabric (`ip -4 addr`); "
        "sparktui takes it from the node's fabric interface, so check the probed facts",
    ),
    # vLLM's Ray executor on a platform that names no Ray device (its CPU build, 0.32.0: ray_utils.py
    # initialize_ray_cluster), once every node has joined (captured in the lab, tests/corpus/vllm_cpu_ray_tp2_refused.log)
    Sign(
        PK.RAY_UNSUPPORTED,
        _q(r"current platform (\w+) does not support ray"),
        message="vLLM has no Ray executor on its {0} platform",
        hint="this build cannot run the Ray mode: use --mode native",
    ),
    Sign(
        PK.RAY_MISSING,
        _q(
            r"ray: (?:command )?not found|No module named '?ray'?|"
            r"executable file not found in \$PATH.*\bray\b|\"ray\": executable file not found"
        ),
        message="the image has no Ray",
        hint="recent NVIDIA vLLM images ship without Ray: build one with pip install 'ray[default]', "
        "or use --mode native",
    ),
    # vLLM's model registry refusing config.json's `architectures` (pydantic's "Value error, Model architectures
    # ['X'] are not supported for now. Supported architectures: dict_keys([...hundreds...])", 0.32.0 in the lab,
    # tests/corpus/vllm_cpu_unknown_architecture.log): its own sentence, without the list that follows
    Sign(
        PK.UNSUPPORTED_MODEL,
        _q(r"(Model architectures \[[^\]]*\] are not supported for now)"),
        message="{0}",
        hint="this vLLM has no model class for config.json's `architectures`: use an image with a vLLM that "
        "supports it (or fix `architectures` if it is misspelt)",
    ),
    # a checkpoint directory without weight files (vllm/model_executor/model_loader/default_loader.py, 0.32.0,
    # tests/corpus/vllm_cpu_checkpoint_without_weights.log): the worker's own sentence names the path
    Sign(
        PK.MODEL_NOT_FOUND,
        _q(r"(Cannot find any model weights with `[^`]*`)"),
        message="{0}",
        hint="the model directory holds no weight files (*.safetensors, *.bin) on that node: copy the whole "
        "checkpoint there (`sparktui sync model` completes and verifies the copy)",
    ),
    # the CPU build's KV cache in host memory (vllm/v1/worker/cpu_worker.py determine_available_memory, 0.32.0)
    Sign(
        PK.OUT_OF_MEMORY,
        _q(
            r"(Available memory on node \d+ \(\S+ GiB\) on kv cache allocation is less than requested memory "
            r"for kv \([^)]*\))"
        ),
        message="{0}",
        hint="the KV cache asked does not fit the host's free memory: pass a smaller --kv-cache-bytes "
        "(or VLLM_CPU_KVCACHE_SPACE), or free memory on the node",
    ),
    # vLLM's multiprocessing executor bounds each step's RPC to its workers by VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS
    # (300 s; vllm/v1/executor/multiproc_executor.py collective_rpc): a rank stuck in a collective ends there
    Sign(
        PK.WATCHDOG_TIMEOUT,
        _q(r"RPC call to (execute_model|sample_tokens) timed out"),
        message="a step's workers did not answer within VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS ({0} RPC timed out)",
        hint="a rank stopped answering inside a collective (a frozen, paused or unplugged node, or the fabric link): "
        "check every node; raise VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS only for steps that are slow on purpose",
    ),
)
# phase -> its own lines there (phases.py holds the shared ones)
PHASE_SIGNS = {
    Phase.FIRST_REQUEST: r"Avg prompt throughput:",
    Phase.HTTP_UP: r"Starting vLLM (?:API )?server",
    # vLLM on CPUs compiles instead of capturing
    Phase.GRAPHS: r"Capturing CUDA graph|Graph capturing finished|Warming up model for the compilation",
    Phase.KV_CACHE: r"[GC]PU KV cache size|Available KV cache memory|# GPU blocks:|Maximum concurrency for",
    Phase.WEIGHTS: r"Starting to load model|Loading weights took|Loading model weights took|Auto-prefetch is disabled|"
    r"Filesystem type for checkpoints|Prefetching checkpoint files|Model loading took",
    Phase.DIST_INIT: r"Initializing an? (?:V\d )?LLM engine|world_size=\d+ rank=\d+|distributed_init_method=|"
    r"is using nccl==",
}
HANG_ADVICE = (
    "a rank cannot reach the rendezvous: VLLM_HOST_IP must be each node's fabric IP, --master-addr the "
    "head's, NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME each node's interface on that subnet, and the port "
    "reachable from every worker; `sparktui preflight` checks them"
)
HANG_ENV = ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")  # what that advice asks for
HANG_ADVICE_ENV_SET = (
    "the plan already set VLLM_HOST_IP, NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME on every node, so the "
    "next likely cause is the path between the nodes: a firewall dropping the rendezvous port "
    "(--master-port) or NCCL's ports on the fabric, or a link that lost its carrier; `sparktui preflight` "
    "checks the rendezvous across every node"
)


# eugr's nightly Spark images (eugr/spark-vllm-docker: README.md at 013cd2e, Dockerfile at 03860ea): both install
# `ray[default]` and build NCCL from NVIDIA/nccl; build-and-copy.sh tags them vllm-node / vllm-node-b12x. The b12x
# one runs local-inference-lab's vLLM fork, whose RoCEnante (vllm/distributed/device_communicators/
# b12x_roce_all_reduce.py at 3b85a95) takes TP all-reduces of groups spanning nodes up to
# VLLM_ROCE_ALLREDUCE_MAX_SIZE when VLLM_ENABLE_ROCE_ALLREDUCE=1, "NCCL remains the fallback above".
_EUGR_SOURCE = "eugr/spark-vllm-docker README.md and Dockerfile"
_EUGR_NCCL = "NCCL built from NVIDIA/nccl in the image (torch's pip copy links to it)"
_ROCE = "VLLM_ENABLE_ROCE_ALLREDUCE"
COMMUNITY_IMAGES = (
    CommunityImage(
        repos=("eugr/spark-vllm-b12x",),
        local_tags=("vllm-node-b12x",),
        what="local-inference-lab's vLLM fork with the b12x kernels, tested nightly",
        ray=True,
        nccl=_EUGR_NCCL,
        source=_EUGR_SOURCE + "; local-inference-lab/vllm b12x_roce_all_reduce.py",
        tp_all_reduce="b12x one-shot RoCE collectives (RoCEnante)",
        env={
            _ROCE: "1 puts TP all-reduces across nodes on the b12x RoCE collectives",
            "VLLM_ROCE_ALLREDUCE_MAX_SIZE": "the largest all-reduce they take (NCCL above)",
            "VLLM_ROCE_ALLGATHER_MAX_SIZE": "the largest all-gather shard they take",
            "B12X_AUTOTUNE": "1 turns the b12x autotuning on (0 in the image)",
        },
    ),
    CommunityImage(
        repos=("eugr/spark-vllm",),
        local_tags=("vllm-node",),
        what="vLLM main, tested nightly",
        ray=True,
        nccl=_EUGR_NCCL,
        source=_EUGR_SOURCE,
        env={"B12X_AUTOTUNE": "1 turns the b12x autotuning on (0 in the image)"},
    ),
)
_ON = {"1", "true", "yes", "on"}


class VLLM(Engine):
    name = NAME
    support_probe = SUPPORT_PROBE
    support_newer_image = SUPPORT_NEWER_IMAGE
    bench_client = BENCH_CLIENT
    community_images = COMMUNITY_IMAGES
    label = "vLLM"
    modes = MODES
    shapes = {"ray": "ray-driver", "native": "ranks"}
    mode_labels = {"ray": "Ray"}
    default_port = 8000
    image_note = "NGC; no Ray inside: --mode defaults to native"
    package = "vllm"
    health_paths = HEALTH_PATHS
    ready_line = READY_LINE
    host_ip_env = "VLLM_HOST_IP"
    metric_series, metric_renamed = METRIC_SERIES, METRIC_RENAMED
    dist_begin = _q(r"Initializing an? (?:V\d )?LLM engine|distributed_init_method=\S+")
    # printed once initialize_model_parallel returns (after the cross-node message queue is up)
    dist_end = _q(r"rank \d+ in world size \d+ is assigned as")
    ready_sign = _q(r"Application startup complete\.")
    signs = SIGNS
    phase_signs = PHASE_SIGNS
    hang_advice, hang_env, hang_advice_env_set = HANG_ADVICE, HANG_ENV, HANG_ADVICE_ENV_SET
    # vllm/envs.py VLLM_API_KEY, read by entrypoints/serve/middleware/register.py (0.31.0) when --api-key is not given
    api_key_env = "VLLM_API_KEY"
    # vllm/engine/arg_utils.py and entrypoints/openai/cli_args.py (tests/contract checks each in every release)
    vocabulary = {
        "model": "--model",
        "tp": "--tensor-parallel-size",
        "pp": "--pipeline-parallel-size",
        "served_name": "--served-model-name",
        "context_length": "--max-model-len",
        "mem_fraction": "--gpu-memory-utilization",
        "api_key": "--api-key",
        "trust_remote_code": "--trust-remote-code",
        "dtype": "--dtype",
        "kv_cache_dtype": "--kv-cache-dtype",
        "quantization": "--quantization",
        "load_format": "--load-format",
        "download_dir": "--download-dir",
        "chat_template": "--chat-template",
        "revision": "--revision",
        "tool_call_parser": "--tool-call-parser",
        "reasoning_parser": "--reasoning-parser",
        "tokenizer": "--tokenizer",
        "seed": "--seed",
        "max_running": "--max-num-seqs",
        "eager": "--enforce-eager",
    }
    # vLLM serves tool calls only with both
    companions = {"--tool-call-parser": "--enable-auto-tool-choice"}
    switches = frozenset(
        {
            "--trust-remote-code",
            "--enforce-eager",
            "--enable-auto-tool-choice",
            "--enable-prefix-caching",
            "--no-enable-prefix-caching",
            "--enable-chunked-prefill",
            "--disable-log-requests",
            "--disable-log-stats",
            "--enable-expert-parallel",
            "--headless",
        }
    )
    managed_flags = frozenset(
        {
            "--model",
            "--tensor-parallel-size",
            "-tp",
            "--pipeline-parallel-size",
            "-pp",
            "--nnodes",
            "--node-rank",
            "--master-addr",
            "--master-port",
            "--distributed-executor-backend",
            "--headless",
            "--host",
            "--port",
        }
    )
    fit_fraction = 0.8
    kv_cache_bytes_flag = "--kv-cache-memory-bytes"
    fit_covers = "vLLM's share for weights, activations and KV cache"
    activations_in_budget = True
    log_words = ("vllm", "ray runtime started")
    reads_neutral_logs = True  # its rule set holds every engine-neutral signature
    recipe_runtimes = {
        "vllm-ray": "ray",
        "vllm-distributed": "native",
        "eugr-vllm": "ray",
    }  # sparkrun: a vllm-ray runtime with the eugr builder (deprecated)
    recipe_programs = (("vllm", "serve"), ("python3", "-m", "vllm.entrypoints.openai.api_server"))
    # sparkrun 0.4.2 runtimes/_vllm_common.py VLLM_FLAG_MAP and VLLM_BOOL_FLAGS: defaults key -> flag
    recipe_flags = {
        "dtype": "--dtype",
        "quantization": "--quantization",
        "kv_cache_dtype": "--kv-cache-dtype",
        "max_num_seqs": "--max-num-seqs",
        "max_num_batched_tokens": "--max-num-batched-tokens",
        "api_key": "--api-key",
        "attention_backend": "--attention-backend",
        "load_format": "--load-format",
        "reasoning_parser": "--reasoning-parser",
        "tool_call_parser": "--tool-call-parser",
        "data_parallel": "--data-parallel-size",
        "enforce_eager": "--enforce-eager",
        "enable_prefix_caching": "--enable-prefix-caching",
        "enable_auto_tool_choice": "--enable-auto-tool-choice",
        "enable_chunked_prefill": "--enable-chunked-prefill",
        "async_scheduling": "--async-scheduling",
        "chat_template": "--chat-template",
        "speculative_config": "--speculative-config",
        "tokenizer_mode": "--tokenizer-mode",
        "mm_encoder_tp_mode": "--mm-encoder-tp-mode",
        "block_size": "--block-size",
        "seed": "--seed",
        "otlp_traces_endpoint": "--otlp-traces-endpoint",
        "generation_config": "--generation-config",
        "hf_overrides": "--hf-overrides",
        "compilation_config": "--compilation-config",
        "attention_config": "--attention-config",
        "model_loader_extra_config": "--model-loader-extra-config",
        "default_chat_template_kwargs": "--default-chat-template-kwargs",
        "limit_mm_per_prompt": "--limit-mm-per-prompt",
        "mm_processor_cache_gb": "--mm-processor-cache-gb",
        "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
        "max_cudagraph_capture_size": "--max-cudagraph-capture-size",
        "long_prefill_token_threshold": "--long-prefill-token-threshold",
        "mamba_cache_dtype": "--mamba-cache-dtype",
        "mamba_ssm_cache_dtype": "--mamba-ssm-cache-dtype",
        "enable_prompt_tokens_details": "--enable-prompt-tokens-details",
        "enable_force_include_usage": "--enable-force-include-usage",
        "enable_request_id_headers": "--enable-request-id-headers",
        "disable_custom_all_reduce": "--disable-custom-all-reduce",
    }
    # VLLM_NEGATABLE_BOOL_FLAGS: on by default in vLLM, so a recipe's false is written --no-<flag>
    recipe_negated = frozenset({"enable_prefix_caching", "enable_chunked_prefill", "async_scheduling"})

    # sizes the KV cache in bytes, the fraction then left aside (vllm/config/cache.py kv_cache_memory_bytes)
    kv_bytes_flag = "--kv-cache-memory-bytes"
    kv_bytes_since = VLLM_KV_BYTES_SINCE
    auto_len_since = VLLM_AUTO_LEN_SINCE  # --max-model-len auto
    # The KV cache is torch tensors from PyTorch's caching allocator (vllm/v1/worker/gpu_worker.py
    # initialize_from_config -> model_runner.initialize_kv_cache, a nullcontext unless sleep mode). Sleep mode
    # allocates through vLLM's own CuMemAllocator (vllm/device_allocator/cumem.py), whose __init__ asserts
    # "expandable_segments:True" not in PYTORCH_CUDA_ALLOC_CONF ("Expandable segments are not compatible with
    # memory pool", pytorch/pytorch#147851) in the releases before use_memory_pool turned them off around the pool.
    torch_allocator = True
    expandable_refused_by = {
        "--enable-sleep-mode": "vLLM's sleep-mode allocator (CuMemAllocator) asserts that "
        "expandable segments are off in the releases that have it"
    }

    def node_env(self, ctx: Context, spot: Spot) -> dict[str, str]:
        return node_env(ctx, spot)

    def steps(self, ctx: Context) -> list[Step]:
        return steps(ctx)

    def tp_collectives(self, env, image) -> dict | None:
        """RoCEnante, where the env turns it on: {"all_reduce", "max_size", "above", "carried"}; carried is
        False when the image is known not to read the variable (NCCL then carries every all-reduce)."""
        if str(env.get(_ROCE, "")).strip().lower() not in _ON:
            return None
        carried = None if image is None else bool(image.family.tp_all_reduce)
        return {
            "all_reduce": "b12x one-shot RoCE collectives (RoCEnante)",
            "env": f"{_ROCE}={env[_ROCE]}",
            "max_size": env.get("VLLM_ROCE_ALLREDUCE_MAX_SIZE") or None,
            "all_gather_max_size": env.get("VLLM_ROCE_ALLGATHER_MAX_SIZE") or None,
            "above": "NCCL",
            "carried": carried,
        }

    def pick_mode(self, info, version: str | None) -> tuple[str, str]:
        """Native in an image without Ray whose release runs natively. NGC's vLLM images ship without Ray from
        26.05-py3 (NVIDIA/dgx-spark-playbooks nvidia/vllm/README.md, commit 0db7c14: "The 26.05-py3 NGC image
        ships without ray"). Native too for a CPU build, which has no Ray executor (cpubuild.ray_refusal)."""
        release = version or (info.version(self.package) if info is not None else None)
        if info is not None and info.has("ray") is False:
            if vllm_native_refusal(release) is None:
                return "native", f"mode native: {info.ref} has no Ray"
        if cpubuild.is_cpu_build(release) and vllm_native_refusal(release) is None:
            return "native", f"mode native: {release} is a CPU build, which has no Ray executor"
        return self.modes[0], ""

    def refusals(self, mode: str, image: str, info, version: str | None) -> list[str]:
        out = []
        if mode == "native" and (why := vllm_native_refusal(version)):
            out.append(why)
        if mode == "ray" and (why := cpubuild.ray_refusal(version)):
            out.append(why)
        elif mode == "ray" and info is not None and info.has("ray") is False:
            out.append(
                f"{image} has no Ray, which vLLM's Ray mode runs in every container: add it to the image "
                f"(pip install 'ray[default]'), use another image, or use --mode native"
            )
        return out

    def resolve_recipe(
        self, runtime: str, builder: str, data: dict, defaults: dict, cmd: str
    ) -> tuple[str, str, str | None] | None:
        """sparkrun 0.4.2 core/recipe.py: _resolve_vllm_variant (vllm, or no runtime, -> vllm-ray when
        defaults.distributed_executor_backend is ray or the command holds `--distributed-executor-backend ray`,
        else vllm-distributed), and _resolve_v1_migration / _resolve_eugr_signals (recipe_version "1",
        build_args, or an eugr nightly container get the eugr builder)."""
        if runtime not in ("vllm", ""):
            return None
        if not builder:
            rc = data.get("runtime_config")
            build_args = data.get("build_args") or (rc.get("build_args") if isinstance(rc, dict) else None)
            if (
                str(data.get("recipe_version", "2")) == "1"
                or build_args
                or str(data.get("container") or "").strip().startswith(EUGR_CONTAINER)
            ):
                builder = "eugr"
        ray = str(defaults.get("distributed_executor_backend", "")).lower() == "ray" or _RAY_BACKEND.search(cmd)
        variant = "vllm-ray" if ray else "vllm-distributed"
        bare = "runtime vllm" if runtime else "no runtime"
        why = (
            f"{bare} with distributed_executor_backend ray means vllm-ray (vLLM over Ray)"
            if ray
            else f"{bare} and no Ray backend named means vllm-distributed (vLLM's own multi-node mode)"
        )
        return variant, builder, why

    def bad_arguments_hint(self, text: str) -> str | None:
        if any(f in text for f in ("--nnodes", "--headless", "--master-addr", "--node-rank")):
            return "this vLLM predates native multi-node (--nnodes/--headless): use --mode ray or a newer image"
        return None


ENGINE = VLLM()
