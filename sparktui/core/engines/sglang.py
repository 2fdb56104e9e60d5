"""SGLang multi-node: every rank runs the same server command with its own --node-rank.

`sglang serve` where the release has the `sglang` command (0.5.5 on), `python3 -m sglang.launch_server` before.

Workers start first and the head last (SGLang's own multi-node recipe); only rank 0 serves HTTP.
"""

from __future__ import annotations

from ..diagnosis import quickre
from .base import Engine
from .logsigns import Sign
from ..state.states import Phase, ProblemKind as PK
from .common import HOST_ALL, Context, Spot, Step, Word, docker_run, make_step, opt
from .versions import at_least

NAME = "sglang"
MODES = ("native",)
HEALTH_PATHS = ("/health", "/health_generate", "/v1/models")
READY_LINE = "The server is fired up and ready to roll!"

# SGLang's switch for its TP memory-balance check: SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK (default on; 0 turns
# it off) since 0.5.7; releases before read SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=1.
SGLANG_ENABLE_SWITCH_SINCE = "0.5.7"
# `sglang serve` (the `sglang` console script, sglang/cli/main.py) first ships in 0.5.5; 0.5.4.post3 has neither
# the script nor sglang/cli, so older releases run the module
SGLANG_SERVE_SINCE = "0.5.5"


def sglang_program(version: str | None) -> list[str]:
    """How this release starts a server: `sglang serve`, or the module before it had one."""
    if version and not at_least(version, SGLANG_SERVE_SINCE):
        return ["python3", "-m", "sglang.launch_server"]
    return ["sglang", "serve"]


def sglang_balance_switch(version: str | None) -> dict[str, str]:
    """The environment that turns off SGLang's memory-balance check in this release.

    Right after a copy the receiving node holds the checkpoint in page cache, which the GPU's free
    memory does not count on unified memory, so the ranks look unbalanced and SGLang refuses to
    start; sparktui checks free memory per node itself before launching.
    """
    if version and not at_least(version, SGLANG_ENABLE_SWITCH_SINCE):
        return {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1"}
    return {"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "0"}


def node_env(ctx: Context, spot: Spot) -> dict[str, str]:
    # Without it SGLang's cross-node message queue picks its own address (often the management NIC)
    # and both ranks freeze after "Custom allreduce is disabled ...".
    env = {"SGLANG_HOST_IP": spot.ip} if spot.ip else {}
    return {**env, **sglang_balance_switch(ctx.engine_version)}


def launch_words(ctx: Context, spot: Spot) -> list[Word]:
    w: list[Word] = [*sglang_program(ctx.engine_version), "--model-path", ctx.model_path, "--tp", str(ctx.tp)]
    if ctx.pp > 1:
        w += ["--pp-size", str(ctx.pp)]
    w += [
        "--nnodes",
        str(len(ctx.nodes)),
        "--node-rank",
        str(spot.rank),
        "--dist-init-addr",
        f"{ctx.head_ip}:{ctx.dist_port}",
        "--host",
        HOST_ALL,
        "--port",
        str(ctx.port),
    ]
    w += opt("--mem-fraction-static", ctx.mem_fraction)
    w += opt("--context-length", ctx.max_model_len)
    w += opt("--served-model-name", ctx.served_name)
    # the serving view reads Prometheus /metrics, which SGLang serves only with this flag
    # (0.5.3.post3 server_args.py "--enable-metrics"; 0.5.23 arg_groups/fields/observability.py enable_metrics)
    w.append("--enable-metrics")
    if ctx.trust_remote_code:
        w.append("--trust-remote-code")
    return w + list(ctx.extra_args)


def steps(ctx: Context) -> list[Step]:
    """Workers first, head last: the head's rendezvous then finds every rank already waiting."""
    out = []
    for spot in ctx.workers + [ctx.head]:
        what = "head, serves HTTP" if spot.rank == 0 else "worker"
        out.append(
            make_step(
                spot.name,
                spot.rank,
                "run",
                docker_run(ctx, spot, launch_words(ctx, spot)),
                f"start SGLang rank {spot.rank} ({what})",
                ctx.container(spot),
            )
        )
    return out


# -- the support check (core/plan/support.py): how to ask an SGLang image what it can load, run by its python3.
# SGLang's ModelRegistry (sglang/srt/models/registry.py, 0.5.3.post3 and 0.5.23) is the EntryClass names of
# the modules of sglang.srt.models, less SGLANG_DISABLED_MODEL_ARCHS; importing them needs the GPU stack, so
# the source is read the same way without importing (ast), and the imported registry is asked only where
# no source holds an EntryClass. Quantization: the keys of sglang/srt/layers/quantization/__init__.py's
# QUANTIZATION_METHODS. Own configs for model types transformers lacks: _CONFIG_REGISTRY
# (0.5.3.post3 srt/utils/hf_transformers_utils.py; 0.5.23 srt/utils/hf_transformers/common.py).
SUPPORT_PROBE = """
def _sources(package):
    import importlib.util, os
    spec = importlib.util.find_spec(package)
    where = list(spec.submodule_search_locations or []) if spec else []
    return [os.path.join(d, n) for d in where for n in sorted(os.listdir(d)) if n.endswith(".py")]

def registry_archs():
    import ast, os
    off = {x.strip() for x in os.environ.get("SGLANG_DISABLED_MODEL_ARCHS", "").split(",") if x.strip()}
    out = set()
    for path in _sources("sglang.srt.models"):
        if os.path.basename(path)[:-3] in off:
            continue
        text = open(path, encoding="utf-8-sig", errors="replace").read()
        if "EntryClass" not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:  # as SGLang skips a module that does not import
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EntryClass" for t in node.targets):
                vals = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                out |= {v.id for v in vals if isinstance(v, ast.Name)}
    if not out:
        from sglang.srt.models.registry import ModelRegistry
        out = set(ModelRegistry.get_supported_archs())
    return out

def quant_methods():
    try:
        from sglang.srt.layers.quantization import QUANTIZATION_METHODS
        return set(QUANTIZATION_METHODS)
    except Exception:
        import ast
        paths = [p for p in _sources("sglang.srt.layers.quantization") if p.endswith("__init__.py")]
        tree = ast.parse(open(paths[0], encoding="utf-8-sig").read())
        return {k.value for d in ast.walk(tree) if isinstance(d, ast.Dict)
                for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}

def config_types():
    import importlib
    for name in ("sglang.srt.utils.hf_transformers.common", "sglang.srt.utils.hf_transformers_utils"):
        try:
            return set(importlib.import_module(name)._CONFIG_REGISTRY)
        except Exception:
            continue
    raise RuntimeError("SGLang's own config registry did not import")
"""
# What to name as the way out when this image's SGLang lacks an architecture: the newest release the
# contract tier checks (tests/contract/venvs.py), in NVIDIA's SGLang playbook image.
SUPPORT_NEWER_IMAGE = "lmsysorg/sglang:latest-cu130 (SGLang 0.5.23)"

# -- metrics: sglang/srt/metrics/collector.py (0.5.3.post3) and sglang/srt/observability/metrics_collector.py
# (0.5.23): Gauges sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage (0-1), Counters
# sglang:prompt_tokens_total and sglang:generation_tokens_total, Histograms sglang:time_to_first_token_seconds
# and sglang:inter_token_latency_seconds. SGLang serves /metrics only with --enable-metrics (0.5.3.post3
# server_args.py; 0.5.23 arg_groups/fields/observability.py, enable_metrics); sparktui plans add it.
METRIC_SERIES = {
    "running": "sglang:num_running_reqs",
    "waiting": "sglang:num_queue_reqs",
    "kv_cache_usage": "sglang:token_usage",
    "prompt_tokens": "sglang:prompt_tokens_total",
    "generation_tokens": "sglang:generation_tokens_total",
    "ttft": "sglang:time_to_first_token_seconds",
    "itl": "sglang:inter_token_latency_seconds",
}

# -- its log lines (the engine-neutral ones are logsigns')
_q = quickre.compile  # a substring prefilter in front of each: every line is tried against them
SIGNS = (
    # SGLang's soft watchdog only dumps stacks; the server goes on
    Sign(
        PK.WATCHDOG_TIMEOUT,
        _q(r"atchdog timeout \(self\.watchdog_timeout=([\d.]+), self\.soft=True"),
        provisional=True,
        message="SGLang's soft watchdog dumped the scheduler's stacks after {0} s without progress",
        hint="a slow step, not a failure, if serving goes on; otherwise read the dump for where it waits",
    ),
    Sign(
        PK.WATCHDOG_TIMEOUT,
        _q(r"(?:Scheduler w|W)atchdog timeout \(self\.watchdog_timeout=([\d.]+)"),
        message="SGLang's watchdog killed the scheduler after {0} s without progress",
        hint="the scheduler was stuck; read the lines before it for where",
    ),
)
# phase -> its own lines there (phases.py holds the shared ones): "[.. TP0] Load weight begin", ...
PHASE_SIGNS = {
    Phase.FIRST_REQUEST: r"Decode batch(?: \[\d+\])?[.,] |The server is fired up and ready to roll",
    Phase.GRAPHS: r"Capture cuda graph|cuda graph begin",
    Phase.KV_CACHE: r"KV Cache is allocated|Memory pool end",
    Phase.WEIGHTS: r"Load weight begin|Load weight end",
    Phase.DIST_INIT: r"Init torch distributed begin|Init torch distributed ends",
}
# The rendezvous hang: SGLang's cross-node message queue picks an address of its own without SGLANG_HOST_IP
# (REFERENCE.md "Rendezvous" names the variables the advice asks for).
HANG_ADVICE = (
    "SGLang's cross-node message queue picked an address of its own: SGLANG_HOST_IP must be this node's "
    "IP on the rendezvous subnet and NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME its interface there "
    "(sparktui plans set both), and --dist-init-addr the head's fabric IP; `sparktui preflight` checks "
    "the subnet. If it still hangs, pivot to vLLM with Ray (`sparktui pivot --to vllm`)"
)
HANG_ENV = ("SGLANG_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
HANG_ADVICE_ENV_SET = (
    "the plan already set SGLANG_HOST_IP, NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME on every node, so "
    "the next likely cause is the path between the nodes: a firewall dropping the rendezvous port "
    "(--dist-init-addr) or NCCL's ports on the fabric, or a link that lost its carrier; "
    "`sparktui preflight` checks the rendezvous across every node. If it passes and SGLang still "
    "hangs here, pivot to vLLM with Ray (`sparktui pivot --to vllm`)"
)


class SGLang(Engine):
    name = NAME
    support_probe = SUPPORT_PROBE
    support_newer_image = SUPPORT_NEWER_IMAGE
    label = "SGLang"
    modes = MODES
    shapes = {"native": "ranks"}
    default_port = 30000
    image_note = "NVIDIA's SGLang playbook, 2026-07"
    package = "sglang"
    health_paths = HEALTH_PATHS
    ready_line = READY_LINE
    host_ip_env = "SGLANG_HOST_IP"
    metric_series = METRIC_SERIES
    dist_begin = _q(r"Init torch distributed begin")
    dist_end = _q(r"Init torch distributed ends")
    ready_sign = _q(r"The server is fired up and ready to roll!")
    signs = SIGNS
    phase_signs = PHASE_SIGNS
    hang_advice, hang_env, hang_advice_env_set = HANG_ADVICE, HANG_ENV, HANG_ADVICE_ENV_SET
    # sglang/srt/server_args.py: the flags for the shared terms (tests/contract checks each in every release)
    vocabulary = {
        "model": "--model-path",
        "tp": "--tp-size",
        "pp": "--pp-size",
        "served_name": "--served-model-name",
        "context_length": "--context-length",
        "mem_fraction": "--mem-fraction-static",
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
        "tokenizer": "--tokenizer-path",
        "seed": "--random-seed",
        "max_running": "--max-running-requests",
        "eager": "--disable-cuda-graph",
    }
    switches = frozenset(
        {
            "--trust-remote-code",
            "--disable-cuda-graph",
            "--disable-radix-cache",
            "--enable-metrics",
            "--enable-dp-attention",
            "--skip-server-warmup",
        }
    )
    managed_flags = frozenset(
        {
            "--model-path",
            "--tp",
            "--tp-size",
            "--pp",
            "--pp-size",
            "--nnodes",
            "--node-rank",
            "--dist-init-addr",
            "--nccl-init-addr",
            "--host",
            "--port",
        }
    )
    fit_fraction = 0.75
    fit_covers = "SGLang's static share: weights + KV cache, activations outside"
    activations_in_budget = False
    # with DP attention every rank holds the whole embedding table and lm_head
    embeddings_replicated_by = "--enable-dp-attention"
    # The KV pool is torch.zeros on the device (python/sglang/srt/mem_cache/memory_pool.py,
    # MHATokenToKVPool._create_buffers, inside memory_saver_adapter.region): PyTorch's caching allocator. With
    # --enable-memory-saver it goes through torch_memory_saver (python/sglang/srt/utils/torch_memory_saver_adapter.py),
    # which refuses expandable segments ("TorchMemorySaver is disabled ... expandable_segments is not supported
    # yet") or cannot pause what they allocate (fzyzcjy/torch_memory_saver#24).
    torch_allocator = True
    expandable_refused_by = {
        "--enable-memory-saver": "SGLang's memory saver (torch_memory_saver) does not work with expandable segments"
    }
    log_words = ("sglang",)
    hang_pivot = ("vllm", "vLLM with Ray joins the ranks through Ray, not torch's TCP rendezvous")
    no_metrics_hint = (
        "SGLang serves /metrics only with --enable-metrics: redeploy with a current sparktui plan "
        "(it adds the flag), or add it to the launch's extra arguments"
    )
    recipe_runtimes = {"sglang": None}
    recipe_command_hint = (r"^(?:sglang\s+serve|python3?\s+-m\s+sglang\.launch_server)\b", "sglang")
    recipe_programs = (
        ("python3", "-m", "sglang.launch_server"),
        ("python", "-m", "sglang.launch_server"),
        ("sglang", "serve"),
    )
    # sparkrun 0.4.2 runtimes/sglang.py _SGLANG_FLAG_MAP and _SGLANG_BOOL_FLAGS: defaults key -> flag
    recipe_flags = {
        "dtype": "--dtype",
        "quantization": "--quantization",
        "kv_cache_dtype": "--kv-cache-dtype",
        "max_num_seqs": "--max-running-requests",
        "chunked_prefill": "--chunked-prefill-size",
        "api_key": "--api-key",
        "attention_backend": "--attention-backend",
        "load_format": "--load-format",
        "reasoning_parser": "--reasoning-parser",
        "tool_call_parser": "--tool-call-parser",
        "expert_parallel": "--ep-size",
        "enable_dp_attention": "--enable-dp-attention",
        "tokenizer_path": "--tokenizer-path",
        "revision": "--revision",
        "model_type": "--model-type",
        "max_total_tokens": "--max-total-tokens",
        "random_seed": "--random-seed",
        "speculative_algorithm": "--speculative-algorithm",
        "speculative_draft_model_path": "--speculative-draft-model-path",
        "speculative_num_steps": "--speculative-num-steps",
        "speculative_eagle_topk": "--speculative-eagle-topk",
        "speculative_num_draft_tokens": "--speculative-num-draft-tokens",
        "cuda_graph_bs": "--cuda-graph-bs",
        "cuda_graph_max_bs": "--cuda-graph-max-bs",
        "torch_compile_max_bs": "--torch-compile-max-bs",
        "num_continuous_decode_steps": "--num-continuous-decode-steps",
        "fp8_gemm_backend": "--fp8-gemm-backend",
        "fp4_gemm_backend": "--fp4-gemm-backend",
        "moe_runner_backend": "--moe-runner-backend",
        "mamba_ssm_dtype": "--mamba-ssm-dtype",
        "enable_torch_compile": "--enable-torch-compile",
        "disable_radix_cache": "--disable-radix-cache",
        "disable_prefill_cuda_graph": "--disable-prefill-cuda-graph",
    }

    def node_env(self, ctx: Context, spot: Spot) -> dict[str, str]:
        return node_env(ctx, spot)

    def steps(self, ctx: Context) -> list[Step]:
        return steps(ctx)


ENGINE = SGLang()
