"""`trtllm-serve serve` options as the real Click command declares them, parsed the way Click does.

Options and aliases: tensorrt_llm/commands/serve.py (NVIDIA/TensorRT-LLM main; docs/trtllm.md). Errors are
Click's own words (pallets/click src/click/exceptions.py NoSuchOption.format_message, UsageError.show):

    Usage: trtllm-serve serve [OPTIONS] MODEL
    Try 'trtllm-serve serve --help' for help.

    Error: No such option: --tp-size Did you mean --tp_size?

and exit status 2. Click suggests with difflib.get_close_matches over the command's long options
(click/parser.py _match_long_opt). Stdlib only: the simulator runs on a bare python3.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field

VERSION_ENV = "SPARKTUI_SIM_TRTLLM_VERSION"
VERSION = os.environ.get(VERSION_ENV) or "1.3.0rc5"  # the playbook's two-Spark image
PROG = "trtllm-serve serve"
USAGE = f"Usage: {PROG} [OPTIONS] MODEL"

# (names, dest, kind, default): kind is int | float | str | flag | choice:<a,b,...>
OPTIONS: list[tuple[tuple[str, ...], str, str, object]] = [
    (("--tokenizer",), "tokenizer", "str", None),
    (("--custom_tokenizer",), "custom_tokenizer", "str", None),
    (("--host",), "host", "str", "localhost"),
    (("--port",), "port", "int", 8000),
    (("--backend",), "backend", "choice:pytorch,tensorrt,_autodeploy,trt", "pytorch"),
    (("--custom_module_dirs",), "custom_module_dirs", "str", None),
    (("--log_level",), "log_level", "str", "info"),  # a Choice of logger.severity_map keys upstream
    (("--max_beam_width",), "max_beam_width", "int", 1),
    (("--max_batch_size",), "max_batch_size", "int", 2048),
    (("--max_num_tokens",), "max_num_tokens", "int", 8192),
    (("--max_seq_len",), "max_seq_len", "int", None),
    (("--tensor_parallel_size", "--tp_size"), "tensor_parallel_size", "int", 1),
    (("--pipeline_parallel_size", "--pp_size"), "pipeline_parallel_size", "int", 1),
    (("--context_parallel_size", "--cp_size"), "context_parallel_size", "int", 1),
    (("--moe_expert_parallel_size", "--ep_size"), "moe_expert_parallel_size", "int", None),
    (("--moe_cluster_parallel_size", "--cluster_size"), "moe_cluster_parallel_size", "int", None),
    (("--gpus_per_node",), "gpus_per_node", "int", None),
    (("--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction"), "free_gpu_memory_fraction", "float", 0.9),
    (("--num_postprocess_workers",), "num_postprocess_workers", "int", 0),
    (("--trust_remote_code",), "trust_remote_code", "flag", False),
    (("--revision",), "revision", "str", None),
    (("--config", "--extra_llm_api_options"), "extra_llm_api_options", "str", None),
    (("--reasoning_parser",), "reasoning_parser", "str", None),
    (("--tool_parser",), "tool_parser", "str", None),
    (("--metadata_server_config_file",), "metadata_server_config_file", "str", None),
    (("--server_role",), "server_role", "str", None),
    (("--fail_fast_on_attention_window_too_large",), "fail_fast_on_attention_window_too_large", "flag", False),
    (("--otlp_traces_endpoint",), "otlp_traces_endpoint", "str", None),
    (("--disagg_cluster_uri",), "disagg_cluster_uri", "str", None),
    (("--enable_chunked_prefill",), "enable_chunked_prefill", "flag", False),
    (("--media_io_kwargs",), "media_io_kwargs", "str", None),
    (("--chat_template",), "chat_template", "str", None),
]
BY_NAME = {n: o for o in OPTIONS for n in o[0]}


class UsageError(Exception):
    """Click's usage error: `text` is what Click prints to stderr; exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.text = f"{USAGE}\nTry '{PROG} --help' for help.\n\nError: {message}"


@dataclass
class ServeArgs:
    model: str = ""
    values: dict = field(default_factory=dict)

    def __getattr__(self, name: str):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None


def _no_such_option(opt: str) -> UsageError:
    close = difflib.get_close_matches(opt, list(BY_NAME))
    msg = f"No such option: {opt}"
    if close:
        shown = ", ".join(sorted(close))
        msg += f" Did you mean {shown}?" if len(close) == 1 else f" (Possible options: {shown})"
    return UsageError(msg)


def _convert(name: str, kind: str, raw: str):
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        what = "integer" if kind == "int" else "float"
        raise UsageError(f"Invalid value for '{name}': {raw!r} is not a valid {what}.") from None
    if kind.startswith("choice:"):
        choices = kind.split(":", 1)[1].split(",")
        if raw not in choices:
            listed = ", ".join(f"'{c}'" for c in choices)
            raise UsageError(f"Invalid value for '{name}': '{raw}' is not one of {listed}.")
        return "tensorrt" if raw == "trt" else raw
    return raw


def parse(argv: list[str]) -> ServeArgs:
    """argv after `trtllm-serve` (an optional leading `serve`, Click's default command, is skipped)."""
    if argv and argv[0] == "serve":
        argv = argv[1:]
    values = {dest: default for _, dest, _, default in OPTIONS}
    model = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            name, eq, inline = a.partition("=")
            opt = BY_NAME.get(name)
            if opt is None:
                raise _no_such_option(name)
            _, dest, kind, _ = opt
            if kind == "flag":
                if eq:
                    raise UsageError(f"Option '{name}' does not take a value.")
                values[dest] = True
            else:
                if eq:
                    raw = inline
                elif i + 1 < len(argv):
                    i += 1
                    raw = argv[i]
                else:
                    raise UsageError(f"Option '{name}' requires an argument.")
                values[dest] = _convert(name, kind, raw)
        elif a.startswith("-") and a != "-":
            raise _no_such_option(a)
        elif model is None:
            model = a
        else:
            raise UsageError(f"Got unexpected extra argument ({a})")
        i += 1
    if model is None:
        raise UsageError("Missing argument 'MODEL'.")
    return ServeArgs(model=model, values=values)
