"""SGLang's launch_server flags (names, aliases and defaults of the real CLI) and its server_args line."""

from __future__ import annotations

import argparse
import os

# The release the simulator plays: the image says which (its environment), like the real one's package.
VERSION_ENV = "SPARKTUI_SIM_SGLANG_VERSION"
VERSION = os.environ.get(VERSION_ENV) or "0.5.23"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_server", description="Launch an SGLang server (simulated engine).")
    a = p.add_argument
    a(
        "--model-path",
        "--model",
        dest="model_path",
        required=True,
        help="The path of the model weights. This can be a local folder or a Hugging Face repo ID.",
    )
    a("--tokenizer-path", help="The path of the tokenizer.")
    a("--served-model-name", help="Override the model name returned by the v1/models endpoint.")
    a("--host", default="127.0.0.1", help="The host of the HTTP server.")
    a("--port", type=int, default=30000, help="The port of the HTTP server.")
    a(
        "--tensor-parallel-size",
        "--tp-size",
        "--tp",
        dest="tp_size",
        type=int,
        default=1,
        help="The tensor parallelism size.",
    )
    a(
        "--pipeline-parallel-size",
        "--pp-size",
        "--pp",
        dest="pp_size",
        type=int,
        default=1,
        help="The pipeline parallelism size.",
    )
    a(
        "--data-parallel-size",
        "--dp-size",
        "--dp",
        dest="dp_size",
        type=int,
        default=1,
        help="The data parallelism size.",
    )
    a(
        "--expert-parallel-size",
        "--ep-size",
        "--ep",
        dest="ep_size",
        type=int,
        default=1,
        help="The expert parallelism size.",
    )
    a("--nnodes", type=int, default=1, help="The number of nodes.")
    a("--node-rank", type=int, default=0, help="The node rank.")
    a(
        "--dist-init-addr",
        "--nccl-init-addr",
        dest="dist_init_addr",
        help="The host address for initializing distributed backend (e.g., `192.168.0.2:25000`).",
    )
    a("--dist-timeout", type=int, default=None, help="Set timeout for torch.distributed initialization.")
    a(
        "--mem-fraction-static",
        type=float,
        default=None,
        help="The fraction of the memory used for static allocation (model weights and KV cache memory pool).",
    )
    a("--context-length", type=int, default=None, help="The model's maximum context length.")
    a("--max-running-requests", type=int, default=None, help="The maximum number of running requests.")
    a("--max-total-tokens", type=int, default=None, help="The maximum number of tokens in the memory pool.")
    a("--chunked-prefill-size", type=int, default=8192, help="The maximum number of tokens in a chunk.")
    a("--max-prefill-tokens", type=int, default=16384, help="The maximum number of tokens in a prefill batch.")
    a("--disable-cuda-graph", action="store_true", help="Disable cuda graph.")
    a("--cuda-graph-max-bs", type=int, default=None, help="Set the maximum batch size for cuda graph.")
    a("--disable-radix-cache", action="store_true", help="Disable RadixAttention for prefix caching.")
    a("--trust-remote-code", action="store_true", help="Whether or not to allow custom models defined on the Hub.")
    a("--watchdog-timeout", type=float, default=300, help="Set watchdog timeout in seconds.")
    a("--dtype", default="auto", help="Data type for model weights and activations.")
    a("--kv-cache-dtype", default="auto", help="Data type for kv cache storage.")
    a("--quantization", default=None, help="The quantization method.")
    a("--load-format", default="auto", help="The format of the model weights to load.")
    a("--download-dir", default=None, help="Model download directory for huggingface.")
    a("--attention-backend", default=None, help="Choose the kernels for attention layers.")
    a("--tool-call-parser", default=None, help="Specify the parser for handling tool-call interactions.")
    a("--reasoning-parser", default=None, help="Specify the parser for reasoning models.")
    a("--enable-metrics", action="store_true", help="Enable log prometheus metrics.")
    a("--enable-dp-attention", action="store_true", help="Enable data parallelism for attention.")
    a("--skip-server-warmup", action="store_true", help="If set, skip warmup.")
    a("--api-key", default=None, help="Set API key of the server.")
    a("--random-seed", type=int, default=None, help="The random seed.")
    a("--log-level", default="info", help="The logging level of all loggers.")
    a("--decode-log-interval", type=int, default=40, help="The log interval of decode batch.")
    return p


def server_args_repr(a: argparse.Namespace) -> str:
    """The `server_args=ServerArgs(...)` line SGLang prints first."""
    fields = [
        ("model_path", a.model_path),
        ("tokenizer_path", a.tokenizer_path or a.model_path),
        ("tokenizer_mode", "auto"),
        ("load_format", a.load_format),
        ("trust_remote_code", a.trust_remote_code),
        ("dtype", a.dtype),
        ("kv_cache_dtype", a.kv_cache_dtype),
        ("quantization", a.quantization),
        ("context_length", a.context_length),
        ("device", "cuda"),
        ("served_model_name", a.served_model_name or a.model_path),
        ("host", a.host),
        ("port", a.port),
        ("mem_fraction_static", a.mem_fraction_static if a.mem_fraction_static is not None else 0.835),
        ("max_running_requests", a.max_running_requests),
        ("chunked_prefill_size", a.chunked_prefill_size),
        ("max_prefill_tokens", a.max_prefill_tokens),
        ("tp_size", a.tp_size),
        ("pp_size", a.pp_size),
        ("dp_size", a.dp_size),
        ("ep_size", a.ep_size),
        ("random_seed", a.random_seed),
        ("watchdog_timeout", a.watchdog_timeout),
        ("dist_timeout", a.dist_timeout),
        ("download_dir", a.download_dir),
        ("log_level", a.log_level),
        ("api_key", a.api_key and "***"),
        ("dist_init_addr", a.dist_init_addr),
        ("nnodes", a.nnodes),
        ("node_rank", a.node_rank),
        ("attention_backend", a.attention_backend),
        ("disable_radix_cache", a.disable_radix_cache),
        ("disable_cuda_graph", a.disable_cuda_graph),
        ("cuda_graph_max_bs", a.cuda_graph_max_bs),
        ("enable_dp_attention", a.enable_dp_attention),
        ("enable_metrics", a.enable_metrics),
        ("skip_server_warmup", a.skip_server_warmup),
        ("tool_call_parser", a.tool_call_parser),
        ("reasoning_parser", a.reasoning_parser),
    ]
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields) + ")"
