"""How sparkrun reads a recipe, where sparktui must read it the same way: which runtime it means, and
a command-less recipe's `defaults` as engine flags, named per engine as sparkrun names them.

The runtime: see resolve_runtime. The flags: sparkrun builds the engine command itself when a recipe
has no `command:` template, and every defaults key it knows becomes a flag (sparkrun 0.4.2: runtimes/_vllm_common.py VLLM_FLAG_MAP, VLLM_BOOL_FLAGS,
VLLM_NEGATABLE_BOOL_FLAGS; runtimes/sglang.py _SGLANG_FLAG_MAP, _SGLANG_BOOL_FLAGS; the rendering in
runtimes/base.py RuntimePlugin.build_flags_from_map and render_flag_value). The table below holds the
upstream-engine entries of those maps (vLLM, SGLang); a key one engine has no flag for is reported for
that engine, never dropped in silence. Keys the plan writes itself (port, TP, memory fraction, ...)
are taken as plan options instead.
"""
from __future__ import annotations

import json
import re

from .secrets import shorten

# sparkrun 0.4.2, core/recipe.py: _CMD_VLLM_RE, _CMD_SGLANG_RE, _CMD_LLAMA_CPP_RE, _CMD_TRTLLM_RE, _RAY_BACKEND_RE
_CMD_HINTS = ((re.compile(r"^(?:sglang\s+serve|python3?\s+-m\s+sglang\.launch_server)\b"), "sglang"),
              (re.compile(r"^llama-server\b"), "llama-cpp"), (re.compile(r"^(?:trtllm-serve|mpirun\b.*trtllm)"), "trtllm"))
_RAY_BACKEND = re.compile(r"--distributed-executor-backend\s+ray\b")
EUGR_CONTAINER = "ghcr.io/spark-arena/dgx-vllm-eugr-nightly"

# key -> (vLLM flag, SGLang flag); None: sparkrun maps no flag for that engine
FLAGS: dict[str, tuple[str | None, str | None]] = {
    "dtype": ("--dtype", "--dtype"),
    "quantization": ("--quantization", "--quantization"),
    "kv_cache_dtype": ("--kv-cache-dtype", "--kv-cache-dtype"),
    "max_num_seqs": ("--max-num-seqs", "--max-running-requests"),
    "max_num_batched_tokens": ("--max-num-batched-tokens", None),
    "chunked_prefill": (None, "--chunked-prefill-size"),
    "api_key": ("--api-key", "--api-key"),
    "attention_backend": ("--attention-backend", "--attention-backend"),
    "load_format": ("--load-format", "--load-format"),
    "reasoning_parser": ("--reasoning-parser", "--reasoning-parser"),
    "tool_call_parser": ("--tool-call-parser", "--tool-call-parser"),
    "data_parallel": ("--data-parallel-size", None),  # SGLang: sparkrun derives --dp-size from its topology
    "expert_parallel": (None, "--ep-size"),
    "enable_dp_attention": (None, "--enable-dp-attention"),
    # vLLM only
    "enforce_eager": ("--enforce-eager", None),
    "enable_prefix_caching": ("--enable-prefix-caching", None),
    "enable_auto_tool_choice": ("--enable-auto-tool-choice", None),
    "enable_chunked_prefill": ("--enable-chunked-prefill", None),
    "async_scheduling": ("--async-scheduling", None),
    "chat_template": ("--chat-template", None),
    "speculative_config": ("--speculative-config", None),
    "tokenizer_mode": ("--tokenizer-mode", None),
    "mm_encoder_tp_mode": ("--mm-encoder-tp-mode", None),
    "block_size": ("--block-size", None),
    "seed": ("--seed", None),
    "otlp_traces_endpoint": ("--otlp-traces-endpoint", None),
    "generation_config": ("--generation-config", None),
    "hf_overrides": ("--hf-overrides", None),
    "compilation_config": ("--compilation-config", None),
    "attention_config": ("--attention-config", None),
    "model_loader_extra_config": ("--model-loader-extra-config", None),
    "default_chat_template_kwargs": ("--default-chat-template-kwargs", None),
    "limit_mm_per_prompt": ("--limit-mm-per-prompt", None),
    "mm_processor_cache_gb": ("--mm-processor-cache-gb", None),
    "kv_cache_memory_bytes": ("--kv-cache-memory-bytes", None),
    "max_cudagraph_capture_size": ("--max-cudagraph-capture-size", None),
    "long_prefill_token_threshold": ("--long-prefill-token-threshold", None),
    "mamba_cache_dtype": ("--mamba-cache-dtype", None),
    "mamba_ssm_cache_dtype": ("--mamba-ssm-cache-dtype", None),
    "enable_prompt_tokens_details": ("--enable-prompt-tokens-details", None),
    "enable_force_include_usage": ("--enable-force-include-usage", None),
    "enable_request_id_headers": ("--enable-request-id-headers", None),
    "disable_custom_all_reduce": ("--disable-custom-all-reduce", None),
    # SGLang only
    "tokenizer_path": (None, "--tokenizer-path"),
    "revision": (None, "--revision"),
    "model_type": (None, "--model-type"),
    "max_total_tokens": (None, "--max-total-tokens"),
    "random_seed": (None, "--random-seed"),
    "speculative_algorithm": (None, "--speculative-algorithm"),
    "speculative_draft_model_path": (None, "--speculative-draft-model-path"),
    "speculative_num_steps": (None, "--speculative-num-steps"),
    "speculative_eagle_topk": (None, "--speculative-eagle-topk"),
    "speculative_num_draft_tokens": (None, "--speculative-num-draft-tokens"),
    "cuda_graph_bs": (None, "--cuda-graph-bs"),
    "cuda_graph_max_bs": (None, "--cuda-graph-max-bs"),
    "torch_compile_max_bs": (None, "--torch-compile-max-bs"),
    "num_continuous_decode_steps": (None, "--num-continuous-decode-steps"),
    "fp8_gemm_backend": (None, "--fp8-gemm-backend"),
    "fp4_gemm_backend": (None, "--fp4-gemm-backend"),
    "moe_runner_backend": (None, "--moe-runner-backend"),
    "mamba_ssm_dtype": (None, "--mamba-ssm-dtype"),
    "enable_torch_compile": (None, "--enable-torch-compile"),
    "disable_radix_cache": (None, "--disable-radix-cache"),
    "disable_prefill_cuda_graph": (None, "--disable-prefill-cuda-graph"),
}
# present when true, absent when false ...
SWITCHES = {"enforce_eager", "enable_prefix_caching", "enable_auto_tool_choice", "enable_chunked_prefill",
            "async_scheduling", "enable_prompt_tokens_details", "enable_force_include_usage",
            "enable_request_id_headers", "disable_custom_all_reduce", "enable_dp_attention", "enable_torch_compile",
            "disable_radix_cache", "disable_prefill_cuda_graph", "trust_remote_code"}
# ... except these, on by default in vLLM: false is written --no-<flag>, or the recipe's false would be lost
NEGATED = {"enable_prefix_caching", "enable_chunked_prefill", "async_scheduling"}
# what the plan writes itself (see recipe.OPTION_KEYS); distributed_executor_backend picks the vLLM mode
PLAN_KEYS = {"port", "host", "tensor_parallel", "pipeline_parallel", "gpu_memory_utilization", "max_model_len",
             "served_model_name", "trust_remote_code", "distributed_executor_backend"}
# read by sparkrun itself (runtimes/base.py's portable and selector keys), not engine flags
SPARKRUN_KEYS = {"executor", "image_prefix", "launcher_image", "use_sentinel_image", "save_build_logs",
                 "transformers", "kubectl", "benchmark_framework", "benchmark_output_dir", "init_port"}
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f", ""}


def switch(value) -> bool | None:
    """A recipe's true/false (YAML booleans, 1/0, yes/no, on/off); None when it is neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return None


def render(value) -> str:
    """One flag value: mappings and lists as compact JSON (the engines' JSON-typed flags), else its text."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), default=str)
    return value.strip() if isinstance(value, str) and value.strip()[:1] in ("{", "[") else str(value)


def defaults_to_flags(defaults: dict, engine: str) -> tuple[list[str], list[str]]:
    """(engine args, warnings) for a recipe without a command template, planned on `engine`."""
    args: list[str] = []
    warnings: list[str] = []
    col = 0 if engine == "vllm" else 1
    for key, value in defaults.items():
        key = str(key)
        if key in PLAN_KEYS or value is None:
            continue
        if key in SPARKRUN_KEYS:
            warnings.append(f"defaults.{key}: read by sparkrun itself, not an engine flag; not used by sparktui")
            continue
        if key not in FLAGS:
            warnings.append(f"defaults.{key}: no engine flag is known for it; not used")
            continue
        flag = FLAGS[key][col]
        if flag is None:
            warnings.append(f"defaults.{key}: {ENGINE_NAMES.get(engine, engine)} has no flag for it; not used")
            continue
        if key in SWITCHES:
            on = switch(value)
            if on is None:
                warnings.append(f"defaults.{key}: {shorten(repr(value), 60)} is neither true nor false; not used")
            elif on:
                args.append(flag)
            elif engine == "vllm" and key in NEGATED:
                args.append("--no-" + flag[2:])
            continue
        args += [flag, render(value)]
    return args, warnings


def resolve_runtime(data: dict) -> tuple[str, str, str | None]:
    """(runtime, builder, why) as sparkrun resolves them; why is None when `runtime:` names it outright.

    sparkrun 0.4.2, core/recipe.py, the resolvers in _RECIPE_RESOLVERS (mirrored by resolve_runtime and
    resolve_builder there):
    - _resolve_runtime_from_command_hint: only without `runtime:`, the command's start names it
      (`sglang serve` / `python -m sglang.launch_server` -> sglang, `vllm serve` -> vllm, llama-server, trtllm);
    - _resolve_vllm_variant: vllm (or nothing) -> vllm-ray when defaults.distributed_executor_backend is
      ray or the command holds `--distributed-executor-backend ray`, else vllm-distributed;
    - _resolve_v1_migration / _resolve_eugr_signals: only recipe_version "1" recipes, build_args, or an
      eugr nightly container get the eugr builder; the runtime stays as resolved above.
    """
    given = data.get("runtime")
    runtime = str(given) if given not in (None, "") else ""
    command = data.get("command")
    cmd = command.strip() if isinstance(command, str) else ""
    why = None
    if not runtime and cmd:
        for rx, rt in _CMD_HINTS:
            if m := rx.match(cmd):
                runtime, why = rt, f"no runtime, and the command runs {' '.join(m[0].split())!r}"
                break
    defaults = data.get("defaults") if isinstance(data.get("defaults"), dict) else {}
    builder = str(data.get("builder") or "")
    if runtime in ("vllm", ""):
        if not builder:
            rc = data.get("runtime_config")
            build_args = data.get("build_args") or (rc.get("build_args") if isinstance(rc, dict) else None)
            if (str(data.get("recipe_version", "2")) == "1" or build_args
                    or str(data.get("container") or "").strip().startswith(EUGR_CONTAINER)):
                builder = "eugr"
        ray = str(defaults.get("distributed_executor_backend", "")).lower() == "ray" or _RAY_BACKEND.search(cmd)
        variant = "vllm-ray" if ray else "vllm-distributed"
        bare = "runtime vllm" if runtime else "no runtime"
        why = (f"{bare} with distributed_executor_backend ray means vllm-ray (vLLM over Ray)" if ray else
               f"{bare} and no Ray backend named means vllm-distributed (vLLM's own multi-node mode)")
        runtime = variant
    return runtime, builder, why
