"""TensorRT-LLM multi-node: one container per node, OpenMPI over SSH between them, `trtllm-serve` on every rank.

The shape is NVIDIA's DGX Spark playbook (NVIDIA/dgx-spark-playbooks nvidia/trt-llm/README.md, "Run on two
Sparks", image nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5): every node runs the same container whose main
process is an SSH server on port 2233; the head holds an OpenMPI hostfile of the nodes' fabric addresses and runs

    mpirun trtllm-llmapi-launch trtllm-serve MODEL --tp_size N ... --port 8355

inside its container. mpirun starts one rank per node (ppr 1 per node) through SSH into the other containers;
trtllm-llmapi-launch (tensorrt_llm/llmapi/trtllm-llmapi-launch) makes rank 0 run trtllm-serve (HTTP) beside an
MPI leader, and every other rank an MPI worker. Only rank 0 serves HTTP.

Each node's interface variables differ (names differ per node), so they are not copied from the head with
`mpirun -x`: each container writes its own environment to ~/.ssh/environment and its sshd reads it
(PermitUserEnvironment), so the rank that SSH starts there gets that node's own values. Facts and sources:
docs/trtllm.md. Registered in ENGINES (engines/__init__.py) as the third engine.
"""

from __future__ import annotations

import dataclasses
import posixpath
import shlex

from ..diagnosis import quickre
from . import common
from .base import Engine
from .logsigns import Sign
from ..state.states import ProblemKind as PK
from .common import HOST_ALL, Break, Context, ExportOnly, Nested, Spot, Step, Word, docker_run, make_step, secrets_in

NAME = "trtllm"
MODES = ("mpi",)
IMAGE_KEY = "trtllm"  # config.images.<key>
DEFAULT_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5"  # the playbook's two-Spark image
DEFAULT_PORT = 8355  # the playbook's `--port 8355` (trtllm-serve's own default is 8000, serve.py --port)
SSH_PORT = 2233  # the playbook's entrypoint sshd port ("If port 2233 is already utilized ... will not start")
HOSTFILE = "/etc/openmpi-hostfile"  # where the playbook copies it (docker cp ... :/etc/openmpi-hostfile)
# The LLM API options file (serve.py --extra_llm_api_options, also spelled --config), read by rank 0's
# trtllm-serve only: return_perf_metrics mounts the Prometheus text at /prometheus/metrics (openai_server.py
# mount_metrics), which the serving view reads; sparktui's plans for SGLang add --enable-metrics alike.
OPTIONS_FILE = "/etc/sparktui-llm-api-options.yaml"
OPTIONS_TEXT = "return_perf_metrics: true\n"
OPTIONS_FLAGS = ("--extra_llm_api_options", "--config")
# (under the remote home, in the container): the playbook's -v ~/.ssh:/tmp/.ssh:ro
SSH_MOUNT = ("/.ssh", "/tmp/.ssh")

# tensorrt_llm/serve/openai_server.py register_routes: /health answers 200 once the executor is healthy, else
# 503 "LLM is unavailable. Please check the server logs for more details."; /v1/models lists one model.
HEALTH_PATHS = ("/health", "/v1/models")
# /metrics is JSON iteration stats, not Prometheus; Prometheus text is at /prometheus/metrics, mounted only when
# the LLM API option return_perf_metrics is true (openai_server.py mount_metrics).
ITERATION_STATS_PATH = "/metrics"
METRICS_PATH = "/prometheus/metrics"
# Series behind the serving view (tensorrt_llm/metrics/collector.py, trtllm_ prefix). 1.3.0rc3 has the two
# histograms (time_to_first_token_seconds, time_per_output_token_seconds: one value per request, its mean gap
# between tokens, read as itl); the gauges and token counters are main's, so an older release shows those fields
# as missing, not as zero.
METRIC_NAMES = {
    "running": "trtllm_num_requests_running",
    "waiting": "trtllm_num_requests_waiting",
    "kv_cache_usage": "trtllm_kv_cache_utilization",
    "prompt_tokens": "trtllm_prompt_tokens_total",
    "generation_tokens": "trtllm_generation_tokens_total",
    "ttft": "trtllm_time_to_first_token_seconds",
    "itl": "trtllm_time_per_output_token_seconds",
}
# uvicorn's lines (trtllm-serve runs uvicorn.Server with log_level="info", openai_server.py __call__).
READY_LINE = "Application startup complete."
LISTEN_LINE = "Uvicorn running on"
VERSION_LINE = "[TensorRT-LLM] TensorRT-LLM version:"  # the playbook's "Expected output" line

# What sparktui sets per node, and what each is read by (checked in tests/contract/test_trtllm_contract.py).
RANK_ENV = ("UCX_NET_DEVICES", "NCCL_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include", "NCCL_IB_HCA")
# OpenMPI settings as the playbook passes them to docker run (-e OMPI_MCA_...): one rank per node, root allowed.
MPI_ENV = {
    "OMPI_MCA_orte_default_hostfile": HOSTFILE,
    "OMPI_MCA_rmaps_ppr_n_pernode": "1",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
}

# What a pivot from SGLang/vLLM cannot carry: no flag for them in the serve.py read (docs/trtllm.md; a later main
# may have --served_model_name: gate it by release once a release that has it is read).
NOT_CARRIED = {
    "served_name": "trtllm-serve has no --served-model-name: /v1/models names the model directory's basename",
    "api_key": "trtllm-serve has no --api-key: put an authenticating proxy in front of it",
}
# Readiness and progress, as the real processes print them (URLs per line in docs/trtllm.md).
WAIT_SSH_S = 120.0  # the workers' sshd comes up within seconds of docker run; an image without sshd never does


def served_name(model_path: str) -> str:
    """The id /v1/models reports: a local directory's basename (OpenAIServer.__init__: model_dir.name)."""
    return posixpath.basename(model_path.rstrip("/")) or model_path


def refusals(ctx: Context, api_key: str | None = None) -> list[str]:
    """Why this plan cannot run as asked (empty when it can)."""
    out = []
    if ctx.tp * ctx.pp != len(ctx.nodes):
        out.append(
            f"TensorRT-LLM runs one rank per node here: TP x PP ({ctx.tp} x {ctx.pp}) must equal the "
            f"number of nodes ({len(ctx.nodes)})"
        )
    if ctx.served_name and ctx.served_name != served_name(ctx.model_path):
        out.append(NOT_CARRIED["served_name"] + f" ({served_name(ctx.model_path)!r}, not {ctx.served_name!r})")
    if api_key:
        out.append(NOT_CARRIED["api_key"])
    return out


# torch's Gloo and TensorPipe sockets: TensorRT-LLM's MPI mode uses neither (MPI for control, NCCL for tensors);
# only its Ray orchestrator starts a torch process group (tensorrt_llm/executor/ray_gpu_worker.py).
NOT_READ = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def interface_env(spot: Spot) -> dict[str, str]:
    """common.interface_env less what nothing under trtllm-serve reads (the plan must use this one)."""
    return {k: v for k, v in common.interface_env(spot).items() if k not in NOT_READ}


def node_env(ctx: Context, spot: Spot) -> dict[str, str]:
    """The container environment besides the interface variables (common.interface_env)."""
    return dict(MPI_ENV)


def hostfile_text(ctx: Context) -> str:
    """One fabric address per line, head first (so rank 0, which serves HTTP, is on the head)."""
    return "".join(f"{s.ip}\n" for s in ctx.nodes)


def entrypoint_script(ssh_port: int = SSH_PORT) -> str:
    """The container's main process: this node's own environment for SSH sessions, then sshd on the port.

    ~/.ssh of the node user is mounted read-only at /tmp/.ssh, as the playbook does; its keys let the head's
    container reach the others (the same passwordless SSH the playbook sets up between the nodes)."""
    return (
        "set -e; mkdir -p /root/.ssh /run/sshd; cp -r /tmp/.ssh/. /root/.ssh/ 2>/dev/null || true; "
        "cat /root/.ssh/*.pub >> /root/.ssh/authorized_keys 2>/dev/null || true; env > /root/.ssh/environment; "
        # private: the environment may carry a token (HF_TOKEN), the keys are keys
        "chmod 700 /root/.ssh; chmod 600 /root/.ssh/* 2>/dev/null || true; "
        "command -v ssh-keygen >/dev/null && ssh-keygen -A >/dev/null; "
        # sshd insists on being started by its absolute path; /usr/sbin/sshd is where images have it
        f'exec "$(command -v sshd || echo /usr/sbin/sshd)" -D -e -p {int(ssh_port)} '
        "-o PermitUserEnvironment=yes -o PermitRootLogin=yes"
    )


def ssh_args(ssh_port: int = SSH_PORT) -> str:
    """What mpirun's ssh launcher adds (plm_rsh_args): the containers' port. The containers' host keys are
    made fresh at each start, so the first connection accepts them (accept-new), never a changed one."""
    return f"-p {int(ssh_port)} -o StrictHostKeyChecking=accept-new -o BatchMode=yes"


def serve_words(ctx: Context) -> list[Word]:
    """trtllm-serve's own argv (flags of tensorrt_llm/commands/serve.py; underscores, as Click declares them)."""
    w: list[Word] = [
        "trtllm-serve",
        ctx.model_path,
        "--backend",
        "pytorch",
        "--tp_size",
        str(ctx.tp),
        "--pp_size",
        str(ctx.pp),
        "--host",
        HOST_ALL,
        "--port",
        str(ctx.port),
    ]
    if not own_options_file(ctx):
        w += ["--extra_llm_api_options", OPTIONS_FILE]
    if ctx.mem_fraction is not None:
        # Of the memory free after weights and buffers, not of the total (see kv_fraction_for)
        w += ["--kv_cache_free_gpu_memory_fraction", str(ctx.mem_fraction)]
    if ctx.max_model_len is not None:
        w += ["--max_seq_len", str(ctx.max_model_len)]
    if ctx.trust_remote_code:
        w.append("--trust_remote_code")
    return w + list(ctx.extra_args)


def own_options_file(ctx: Context) -> bool:
    """The user passes an LLM API options file of their own: theirs is the one (Click keeps one value)."""
    return bool(_extra_flags(ctx) & set(OPTIONS_FLAGS))


def options_words() -> list[Word]:
    return ["sh", "-c", 'printf "%s" "$1" > "$2"', "llm-api-options", OPTIONS_TEXT, OPTIONS_FILE]


def mpirun_words(ctx: Context, ssh_port: int = SSH_PORT) -> list[Word]:
    n = len(ctx.nodes)
    w: list[Word] = [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        str(n),
        "--hostfile",
        HOSTFILE,
        "--map-by",
        "ppr:1:node",
        "--mca",
        "plm_rsh_args",
        ssh_args(ssh_port),
    ]
    # Secrets the ranks need (HF_TOKEN in extra env) go by name, as the playbook's `mpirun -x HF_TOKEN`.
    for s in secrets_in(list(ctx.extra_args)):
        w += ["-x", s.name]
    return w + ["trtllm-llmapi-launch"] + serve_words(ctx)


def hostfile_words(ctx: Context) -> list[Word]:
    return ["sh", "-c", 'printf "%s" "$1" > "$2"', "hostfile", hostfile_text(ctx), HOSTFILE]


def ssh_wait_words(host: str, port: int) -> list[Word]:
    """Prints `open` once host:port accepts TCP (bash's /dev/tcp, no extra tool)."""
    return ["timeout", "5", "bash", "-c", ': </dev/tcp/"$1"/"$2" && echo open', "ssh-wait", host, str(port)]


TO_CONTAINER_LOG = " >/proc/1/fd/1 2>/proc/1/fd/2"  # the container's log is PID 1's (sshd) streams


def steps(ctx: Context, ssh_port: int = SSH_PORT) -> list[Step]:
    """Workers' containers, the head's, then (on the head) wait for every worker's sshd, write the
    hostfile and the LLM API options, and start mpirun; mpirun reaches the workers over SSH on ssh_port."""
    out = []
    entry = ["sh", "-c", entrypoint_script(ssh_port)]
    # the node user's SSH keys, read-only, where the entrypoint copies them from (as the playbook mounts them)
    run_ctx = dataclasses.replace(ctx, files=list(ctx.files) + [SSH_MOUNT])
    for spot in ctx.workers + [ctx.head]:
        what = "head: runs mpirun, rank 0 serves HTTP" if spot.rank == 0 else "worker"
        out.append(
            make_step(
                spot.name,
                spot.rank,
                "run",
                docker_run(run_ctx, spot, entry),
                f"start the TensorRT-LLM container on rank {spot.rank} ({what})",
                ctx.container(spot),
            )
        )
    head, hc = ctx.head, ctx.container(ctx.head)
    for spot in ctx.workers:
        out.append(
            make_step(
                head.name,
                0,
                "wait",
                ["docker", "exec", hc] + ssh_wait_words(spot.ip or "", ssh_port),
                f"wait until {spot.name}'s container answers SSH on {spot.ip}:{ssh_port}",
                hc,
                expect=r"^open$",
                expect_ere="^open$",
                timeout=WAIT_SSH_S,
            )
        )
    out.append(
        make_step(
            head.name,
            0,
            "exec",
            ["docker", "exec", hc] + hostfile_words(ctx),
            f"write the OpenMPI hostfile ({len(ctx.nodes)} nodes) in the head container",
            hc,
        )
    )
    if not own_options_file(ctx):
        out.append(
            make_step(
                head.name,
                0,
                "exec",
                ["docker", "exec", hc] + options_words(),
                "write the LLM API options in the head container (return_perf_metrics: the "
                "Prometheus series at /prometheus/metrics)",
                hc,
            )
        )
    inner = mpirun_words(ctx, ssh_port)
    exec_words: list[Word] = ["docker", "exec", "-d"]
    for s in secrets_in(inner):
        exec_words.append(ExportOnly(("-e", s.name)))
    exec_words += [Break(), hc, "sh", "-c", Nested(tuple(inner), TO_CONTAINER_LOG)]
    out.append(
        make_step(
            head.name,
            0,
            "exec",
            exec_words,
            f"start mpirun trtllm-serve across {len(ctx.nodes)} nodes (rank 0 serves HTTP)",
            hc,
        )
    )
    return out


# ---- releases ---------------------------------------------------------------------------------
# The releases NVIDIA's DGX Spark playbook runs (nvidia/trt-llm/README.md): 1.2.0rc6 on one Spark, 1.3.0rc5 on
# two. Older ones fail on GB10 in public reports (NVIDIA/TensorRT-LLM#8474: GPT-OSS on 1.2.0rc0).
SPARK_SINCE = "1.2.0rc6"
TWO_NODES_SINCE = "1.3.0rc5"


def release_key(version: str) -> tuple | None:
    """'1.3.0rc5' -> (1, 3, 0, 0, 5); a final release sorts after its rcs ('1.2.1' -> (1, 2, 1, 1, 0))."""
    import re

    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(rc|post)(\d+))?", version or "")
    if not m:
        return None
    major, minor, patch, tag, n = m.groups()
    pre = (0, int(n)) if tag == "rc" else (1, int(n or 0))
    return (int(major), int(minor), int(patch or 0)) + pre


def release_note(version: str | None, nodes: int) -> str | None:
    """A warning when the image's release is older than the one the playbook runs for this many nodes."""
    since = TWO_NODES_SINCE if nodes > 1 else SPARK_SINCE
    have, want = release_key(version or ""), release_key(since)
    if have is None or have >= want:
        return None
    return (
        f"TensorRT-LLM {version} in this image is older than {since}, the release NVIDIA's DGX Spark playbook "
        f"runs on {'two Sparks' if nodes > 1 else 'one Spark'}; older releases fail on GB10 in public reports "
        f"(NVIDIA/TensorRT-LLM#8474): use nvcr.io/nvidia/tensorrt-llm/release:{since} or newer"
    )


# ---- fit ------------------------------------------------------------------------------------


def kv_bytes(free_after_weights: float, fraction: float) -> float:
    """KV-cache size: a fraction of the memory still free once weights and buffers are loaded
    (KvCacheConfig.free_gpu_memory_fraction, default 0.9) — not of the GPU's total as vLLM's
    --gpu-memory-utilization or SGLang's --mem-fraction-static are."""
    return max(0.0, free_after_weights) * fraction


def kv_fraction_for(total_fraction: float, total: float, weights: float, free: float | None = None) -> float | None:
    """The TensorRT-LLM fraction that leaves the KV cache the size a total-memory fraction (vLLM/SGLang) gives:
    (total_fraction * total - weights) / (free - weights), free defaulting to total. None when nothing is left."""
    free = total if free is None else free
    want = total_fraction * total - weights
    room = free - weights
    if want <= 0 or room <= 0:
        return None
    return round(min(1.0, want / room), 3)


def describe(ctx: Context, ssh_port: int = SSH_PORT) -> str:
    """One line for screens: who runs what."""
    return (
        f"mpirun on {ctx.head.name} starts {len(ctx.nodes)} ranks over SSH port {ssh_port} "
        f"({', '.join(s.name for s in ctx.nodes)}); rank 0 serves {shlex.quote(served_name(ctx.model_path))} "
        f"on port {ctx.port}"
    )


# ---- log signs --------------------------------------------------------------------------------
# As the real processes print them (docs/trtllm.md names each line's source). Data only, in logsigns' form; the
# engine object below carries them.

_MPI_HINT = (
    f"mpirun on the head reaches the other containers over SSH on port {SSH_PORT}: check each worker "
    "container is running (its sshd is its main process), the fabric IP in the hostfile is that node's, "
    "and the port is open between the nodes (`sparktui preflight`)"
)
_IFACE_HINT = (
    "UCX_NET_DEVICES, NCCL_SOCKET_IFNAME and OMPI_MCA_btl_tcp_if_include must name each node's own "
    "interface on the fabric subnet (sparktui plans set them per node through each container's sshd)"
)

_q = quickre.compile  # a substring prefilter in front of each: every line is tried against them
PROGRESS = {
    "version": _q(r"\[TensorRT-LLM\] TensorRT[- ]LLM version: (\S+)"),
    "mpi_rank": _q(r"\[TensorRT-LLM\]\[INFO\] MPI size: (\d+), MPI local size: (\d+), rank: (\d+)"),
    "leader": _q(r"rank0 run mgmn leader node with mpi_world_size: (\d+)"),
    "worker": _q(r"rank(\d+) run mgmn worker node with mpi_world_size: (\d+)"),
    "kv_cache": _q(r"\[MemUsageChange\] Allocated ([\d.]+) GiB for max tokens in paged KV cache \((\d+)\)"),
    "ready": _q(r"Application startup complete\."),
}

SIGNS = [
    Sign(
        PK.RANK_UNREACHABLE,
        _q(
            r"ssh: connect to host (\S+) port (\d+): (Connection (?:refused|timed out)|"
            r"No route to host)"
        ),
        message="mpirun could not reach the container on {0} (port {1}: {2})",
        hint=_MPI_HINT,
    ),
    Sign(
        PK.RANK_UNREACHABLE,
        _q(
            r"Connection timed out during banner exchange|"
            r"ORTE was unable to reliably start one or more daemons"
        ),
        message="mpirun could not start a rank on another node",
        hint=_MPI_HINT,
    ),
    Sign(
        PK.ENGINE_DIED,
        _q(r"mpirun detected that one or more processes exited with non-zero status"),
        message="a rank exited with an error and mpirun ended the job",
        hint="the first error is in the failing rank's node log (Process name: [[job,1],RANK] names it)",
    ),
    Sign(
        PK.ENGINE_DIED,
        _q(r"ORTE has lost communication with a remote daemon"),
        message="a remote rank's container went away while the job ran",
        hint="read that node's container log for the first error; then restart the launch",
    ),
    Sign(
        PK.NCCL_ERROR,
        _q(
            r"UCX\s+ERROR .*|no NCCL_SOCKET_IFNAME interface found|"
            r"Bootstrap : no socket interface found"
        ),
        hint=_IFACE_HINT,
    ),
    Sign(
        PK.PORT_IN_USE,
        _q(r"Failed to bind socket to (\S+?):(\d+): .*[Aa]ddress already in use"),
        message="the HTTP port {1} is taken",
        hint="another server holds the port: stop it or pick another --port",
    ),
    # tensorrt_llm/_torch/models/modeling_auto.py: the image's model registry lacks the checkpoint's architecture
    Sign(
        PK.UNSUPPORTED_MODEL,
        _q(r"Unknown architecture for AutoModelForCausalLM: (\S+)"),
        message="TensorRT-LLM in this image has no {0} in its model registry",
        hint="use an image whose TensorRT-LLM release lists this architecture (`sparktui check` asks the image), "
        "or pivot to another engine",
    ),
    # tensorrt_llm/_torch/pyexecutor/hang_detector.py (logger.error), then PyExecutor's on_detected error text
    Sign(
        PK.WATCHDOG_TIMEOUT,
        _q(r"\[TRT-LLM\] \[E\] Hang detected after (\d+) seconds"),
        message="TensorRT-LLM's hang detector: an executor iteration made no progress for {0} s; the requests in "
        "flight ended with an error and the executor serves no more",
        hint="a rank stopped answering inside a collective (a frozen, paused or unplugged node, or the fabric "
        "link): check every node's container is running and not paused (`docker ps`), then redeploy "
        "(r, or `sparktui redeploy`)",
    ),
    Sign(
        PK.BAD_ARGUMENTS,
        _q(r"Error: No such option: (\S+)"),
        message="trtllm-serve does not take {0}",
        hint="the TensorRT-LLM release in the image does not have this option: check `trtllm-serve --help`",
    ),
]
# The playbook's harmless warning when one of the two CX-7 ports has no cable.
IGNORE = _q(r"UCX\s+WARN\s+network device '\S+' is not available")


# ---- the support check (core/plan/support.py): how to ask a TensorRT-LLM image what it can load ---------------
# The PyTorch backend's registry (tensorrt_llm/_torch/models/modeling_utils.py): `@register_auto_model("Arch")`
# on each model class fills MODEL_CLASS_MAPPING; AutoModelForCausalLM (modeling_auto.py) looks up
# architectures[0] only, as "EAGLE3" + the name (its "Eagle3" removed) when config.json has draft_vocab_size, and
# fails with "Unknown architecture for AutoModelForCausalLM: ...". The package does not import on a CPU (its
# bindings link CUDA), so the decorators are read from the source with ast, without importing anything;
# MODEL_CLASS_MAPPING itself is asked only where no source holds one. Quantization: the quant_method values
# ModelConfig.load_hf_quant_config (tensorrt_llm/_torch/model_config.py) compares against, plus ModelOpt's,
# whose checkpoints TensorRT-LLM reads from hf_quant_config.json. Sources and the release read: docs/trtllm.md.
SUPPORT_PROBE = """
def _trtllm_roots():
    import importlib.util
    spec = importlib.util.find_spec("tensorrt_llm")  # a top-level package is found, not imported
    return list(spec.submodule_search_locations or []) if spec else []

def _trtllm_files(*parts):
    import os
    out = []
    for root in _trtllm_roots():
        for d, _, names in os.walk(os.path.join(root, *parts)):
            out += [os.path.join(d, n) for n in sorted(names) if n.endswith(".py")]
    return out

def _trtllm_tree(path):
    import ast
    try:
        return ast.parse(open(path, encoding="utf-8-sig", errors="replace").read())
    except (OSError, SyntaxError):
        return None

def registry_archs():
    import ast
    out = set()
    for path in _trtllm_files("_torch", "models"):
        tree = _trtllm_tree(path)
        for node in ast.walk(tree) if tree is not None else ():
            f = getattr(node, "func", None)
            if (isinstance(node, ast.Call) and (getattr(f, "id", None) or getattr(f, "attr", None)) ==
                    "register_auto_model" and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                out.add(node.args[0].value)
    if not out:
        import tensorrt_llm._torch.models
        from tensorrt_llm._torch.models.modeling_utils import MODEL_CLASS_MAPPING
        out = set(MODEL_CLASS_MAPPING)
    return out

def lookup_archs(cfg):
    archs = [a for a in cfg.get("architectures") or [] if isinstance(a, str)]
    if not archs:
        return []
    if "draft_vocab_size" in cfg:
        return ["EAGLE3" + archs[0].replace("Eagle3", "")]
    return archs[:1]

def quant_methods():
    import ast, os
    out, modelopt = set(), False
    for root in _trtllm_roots():
        tree = _trtllm_tree(os.path.join(root, "_torch", "model_config.py"))
        for node in ast.walk(tree) if tree is not None else ():
            modelopt = modelopt or getattr(node, "id", None) == "is_modelopt_quant_config" or (
                isinstance(node, ast.Constant) and node.value == "hf_quant_config.json")
            if not isinstance(node, ast.Compare) or not isinstance(node.left, ast.Call):
                continue
            args = node.left.args
            if (getattr(node.left.func, "attr", None) == "get" and args and isinstance(args[0], ast.Constant)
                    and args[0].value == "quant_method"):
                out |= {c.value for c in node.comparators if isinstance(c, ast.Constant)
                        and isinstance(c.value, str)}
    if not out:
        raise RuntimeError("no quant_method comparison in tensorrt_llm/_torch/model_config.py")
    return out | ({"modelopt"} if modelopt else set())

def config_types():
    raise RuntimeError("TensorRT-LLM keeps no registry of model types beside transformers' that sparktui reads")
"""


# ---- the engine object (base.Engine): what the rest of sparktui reads ------------------------------


def _extra_flags(ctx: Context) -> set[str]:
    """The flag names in the extra arguments (``--flag=value`` counted as ``--flag``)."""
    return {str(w).split("=", 1)[0] for w in ctx.extra_args if str(w).startswith("--")}


class TensorRTLLM(Engine):
    name = NAME
    label = "TensorRT-LLM"
    modes = MODES
    shapes = {"mpi": "mpi"}
    default_port = DEFAULT_PORT
    default_image = DEFAULT_IMAGE
    package = "tensorrt_llm"
    support_probe = SUPPORT_PROBE
    transformers_fallback = False  # AutoModelForCausalLM raises for an architecture the registry lacks
    health_paths = HEALTH_PATHS
    ready_line = READY_LINE
    # NCCL/UCX/OpenMPI take interfaces, not an address: the per-node interface variables pin the sockets,
    # and no variable holds the node's address (the check program reads host-IP variables as addresses)
    host_ip_env = None
    # reached with `pivot --to trtllm` or the form, not the pivot key: an MPI launch that refuses an API key
    # and a served name is a deliberate choice, and the key keeps toggling between the two engines it always did
    in_pivot_cycle = False
    # sparkrun 0.4.2's trtllm runtime (core/recipe.py _CMD_TRTLLM_RE for a recipe that names no runtime)
    recipe_runtimes = {"trtllm": None}
    recipe_command_hint = (r"^(?:trtllm-serve|mpirun\b.*trtllm)", "trtllm")
    # tensorrt_llm/commands/serve.py options (underscores, as Click declares them; docs/trtllm.md). The memory
    # fraction is not here: --kv_cache_free_gpu_memory_fraction is a share of the memory free after the weights,
    # not of the total (kv_fraction_for), so carrying the number over would mean something else.
    vocabulary = {
        "tp": "--tp_size",
        "pp": "--pp_size",
        "context_length": "--max_seq_len",
        "trust_remote_code": "--trust_remote_code",
    }
    not_carried = {
        **NOT_CARRIED,
        "mem_fraction": "--kv_cache_free_gpu_memory_fraction is a share of the memory free after the "
        "weights, not of the total: set it anew (sparktui fit tells the size)",
    }
    fit_fraction = 0.9  # KvCacheConfig.free_gpu_memory_fraction's default
    fit_covers = "TensorRT-LLM's KV cache: a share of the memory free after the weights"
    activations_in_budget = False
    fraction_of_free = True
    fraction_flag = "--kv_cache_free_gpu_memory_fraction"
    # The KV cache pool is allocated by the C++ KVCacheManager through TensorRT-LLM's own BufferManager
    # (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp, WindowBlockManager::allocatePools:
    # mBufferManager.gpuSync(cacheShape, poolDtype)), not by PyTorch's caching allocator: the setting would not
    # reach the memory taken after the weights.
    torch_allocator = False
    torch_allocator_note = (
        "TensorRT-LLM allocates its KV cache pool itself (KVCacheManager's BufferManager), not "
        "through PyTorch's allocator: PYTORCH_CUDA_ALLOC_CONF is not set"
    )
    log_words = ("tensorrt-llm", "tensorrt_llm", "trtllm")
    hang_pivot = ("vllm", "vLLM with Ray joins the ranks through Ray, not OpenMPI over SSH")
    no_metrics_hint = (
        "trtllm-serve serves Prometheus text at /prometheus/metrics only with the LLM API option "
        "return_perf_metrics; /metrics is JSON iteration stats"
    )

    def node_env(self, ctx: Context, spot: Spot) -> dict[str, str]:
        return node_env(ctx, spot)

    def steps(self, ctx: Context) -> list[Step]:
        return steps(ctx)

    def interface_env(self, spot: Spot) -> dict[str, str]:
        return interface_env(spot)

    def plan_refusals(self, ctx: Context) -> list[str]:
        flags = _extra_flags(ctx)
        out = [r for r in refusals(dataclasses.replace(ctx, served_name=None)) if r]
        if flags & {"--api-key", "--api_key"}:
            out.append(NOT_CARRIED["api_key"])
        if flags & {"--served-model-name", "--served_model_name"}:
            out.append(NOT_CARRIED["served_name"])
        return out

    def plan_warnings(self, ctx: Context) -> list[str]:
        out = []
        if note := release_note(ctx.engine_version, len(ctx.nodes)):
            out.append(note)
        if own_options_file(ctx):
            out.append(
                f"your LLM API options file decides whether {METRICS_PATH} is served: sparktui metrics and "
                "the serving view need return_perf_metrics: true in it"
            )
        if ctx.served_name and ctx.served_name != served_name(ctx.model_path):
            out.append(
                f"{NOT_CARRIED['served_name']}: clients ask for {served_name(ctx.model_path)!r}, "
                f"not {ctx.served_name!r}"
            )
        return out

    metrics_path = METRICS_PATH

    metric_series = METRIC_NAMES
    # the MPI size line opens the distributed phase, rank 0's leader line closes it, uvicorn's startup line is
    # ready; its signs go ahead of the shared ones, so its own hint (no GLOO/TP variables here) wins where both match
    dist_begin, dist_end, ready_sign = PROGRESS["mpi_rank"], PROGRESS["leader"], PROGRESS["ready"]
    signs = SIGNS
    hang_advice = f"{_MPI_HINT}; {_IFACE_HINT}"
    hang_env = ("UCX_NET_DEVICES", "NCCL_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include")
    hang_advice_env_set = (
        "the plan already set UCX_NET_DEVICES, NCCL_SOCKET_IFNAME and OMPI_MCA_btl_tcp_if_include on every node, so "
        f"the next likely cause is the path between the nodes: {_MPI_HINT}"
    )


ENGINE = TensorRTLLM()
