"""vLLM's `serve` flags (names, aliases and defaults of the real CLI) for the simulated server."""

from __future__ import annotations

import argparse
import os
import re

# The release the simulator plays: the image says which (its environment), like the real one's package.
VERSION_ENV = "SPARKTUI_SIM_VLLM_VERSION"
DEFAULT_VERSION = "0.33.0"
NATIVE_SINCE = (0, 11, 1)  # --nnodes/--node-rank/--master-addr/--master-port/--headless came with vLLM 0.11.1


def version() -> str:
    return os.environ.get(VERSION_ENV) or DEFAULT_VERSION


def _has_native(v: str) -> bool:
    m = re.match(r"v?(\d+(?:\.\d+)*)", v)
    return bool(m) and tuple(int(p) for p in m.group(1).split(".")) >= NATIVE_SINCE


VERSION = version()


def add_serve_args(p: argparse.ArgumentParser, positional: bool) -> None:
    a = p.add_argument
    if positional:
        a("model_tag", nargs="?", help="The model tag to serve (optional if specified in config)")
    a("--model", help="Name or path of the Hugging Face model to use.")
    a("--host", default=None, help="Host name.")
    a("--port", type=int, default=8000, help="Port number.")
    a("--served-model-name", nargs="+", default=None, help="The model name(s) used in the API.")
    a("--tensor-parallel-size", "-tp", type=int, default=1, help="Number of tensor parallel groups.")
    a("--pipeline-parallel-size", "-pp", type=int, default=1, help="Number of pipeline parallel groups.")
    a("--data-parallel-size", "-dp", type=int, default=1, help="Number of data parallel groups.")
    a(
        "--distributed-executor-backend",
        choices=["ray", "mp", "uni", "external_launcher"],
        default=None,
        help='Backend to use for distributed model workers, either "ray" or "mp" (multiprocessing).',
    )
    if _has_native(VERSION):
        a("--nnodes", "-n", type=int, default=1, help="Number of nodes of the multi-node distributed inference.")
        a("--node-rank", "-r", type=int, default=0, help="Distributed node rank for multi-node inference.")
        a("--master-addr", default="127.0.0.1", help="Distributed master address for multi-node inference.")
        a("--master-port", type=int, default=29501, help="Distributed master port for multi-node inference.")
        a("--headless", action="store_true", help="Run in headless mode (no API server on this node).")
    a(
        "--gpu-memory-utilization",
        type=float,
        default=0.9,
        help="The fraction of GPU memory to be used for the model executor.",
    )
    a("--max-model-len", type=int, default=None, help="Model context length.")
    a("--max-num-seqs", type=int, default=None, help="Maximum number of sequences per iteration.")
    a("--max-num-batched-tokens", type=int, default=None, help="Maximum number of batched tokens per iteration.")
    a("--trust-remote-code", action="store_true", help="Trust remote code from huggingface.")
    a("--enforce-eager", action="store_true", help="Always use eager-mode PyTorch.")
    a("--dtype", default="auto", help="Data type for model weights and activations.")
    a("--kv-cache-dtype", default="auto", help="Data type for kv cache storage.")
    a("--quantization", "-q", default=None, help="Method used to quantize the weights.")
    a("--load-format", default="auto", help="The format of the model weights to load.")
    a("--download-dir", default=None, help="Directory to download and load the weights.")
    a("--tokenizer", default=None, help="Name or path of the Hugging Face tokenizer to use.")
    a("--api-key", default=None, help="If provided, the server will require this key.")
    a("--enable-prefix-caching", action="store_true", help="Enable prefix caching.")
    a("--enable-expert-parallel", action="store_true", help="Use expert parallelism for MoE layers.")
    a("--swap-space", type=float, default=4, help="CPU swap space size (GiB) per GPU.")
    a("--seed", type=int, default=None, help="Random seed for operations.")
    a("--block-size", type=int, default=16, help="Token block size for contiguous chunks of tokens.")
    a("--uvicorn-log-level", default="info", help="Log level for uvicorn.")
    a("--disable-log-requests", action="store_true", help="Disable logging requests.")
    a("--disable-log-stats", action="store_true", help="Disable logging statistics.")
    a("--enable-auto-tool-choice", action="store_true", help="Enable auto tool choice.")
    a("--tool-call-parser", default=None, help="Select the tool call parser.")
    a("--reasoning-parser", default=None, help="Select the reasoning parser.")
    a("--chat-template", default=None, help="The file path to the chat template.")
    a("--limit-mm-per-prompt", default=None, help="Maximum number of input items per modality.")


def set_native_defaults(args: argparse.Namespace) -> None:
    """Releases without native multi-node mode run one node: the server reads these all the same."""
    for k, v in (
        ("nnodes", 1),
        ("node_rank", 0),
        ("master_addr", "127.0.0.1"),
        ("master_port", 29501),
        ("headless", False),
    ):
        if not hasattr(args, k):
            setattr(args, k, v)


def build_cli_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm", description="vLLM CLI (simulated engine)")
    p.add_argument("-v", "--version", action="version", version=VERSION)
    sub = p.add_subparsers(dest="subparser")
    serve = sub.add_parser(
        "serve", help="Start the vLLM OpenAI Compatible API server.", usage="vllm serve [model_tag] [options]"
    )
    add_serve_args(serve, positional=True)
    from .vllm_bench import add_bench_parser  # the client a vLLM image carries: `vllm bench serve`

    add_bench_parser(sub)
    return p
