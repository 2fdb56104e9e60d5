"""How sparkrun reads a recipe, where sparktui must read it the same way: which runtime it means, and
a command-less recipe's `defaults` as engine flags, named per engine as sparkrun names them.

The runtime: see resolve_runtime. The flags: sparkrun builds the engine command itself when a recipe
has no `command:` template, and every defaults key it knows becomes a flag (sparkrun 0.4.2: runtimes/_vllm_common.py VLLM_FLAG_MAP, VLLM_BOOL_FLAGS,
VLLM_NEGATABLE_BOOL_FLAGS; runtimes/sglang.py _SGLANG_FLAG_MAP, _SGLANG_BOOL_FLAGS; the rendering in
runtimes/base.py RuntimePlugin.build_flags_from_map and render_flag_value). Each engine's module holds
the upstream-engine entries of those maps (Engine.recipe_flags); a key one engine has no flag for is
reported for that engine, never dropped in silence. Keys the plan writes itself (port, TP, memory fraction, ...)
are taken as plan options instead.
"""

from __future__ import annotations

import json
import re

from ..engines import ENGINES, get_engine
from ..config.secrets import shorten

# sparkrun 0.4.2, core/recipe.py: _CMD_VLLM_RE, _CMD_SGLANG_RE, _CMD_LLAMA_CPP_RE, _CMD_TRTLLM_RE; an engine's own
# hint is its Engine.recipe_command_hint, the runtimes sparktui does not run are listed here
_CMD_HINTS = tuple(
    (re.compile(e.recipe_command_hint[0]), e.recipe_command_hint[1]) for e in ENGINES.values() if e.recipe_command_hint
) + ((re.compile(r"^llama-server\b"), "llama-cpp"),)

# defaults key -> flag, per engine: Engine.recipe_flags (the upstream-engine entries of sparkrun's maps);
# a key no engine has a flag for is "not known", one only some engines have is reported for the others
KNOWN = frozenset().union(*(e.recipe_flags for e in ENGINES.values()))
# present when true, absent when false ...
SWITCHES = {
    "enforce_eager",
    "enable_prefix_caching",
    "enable_auto_tool_choice",
    "enable_chunked_prefill",
    "async_scheduling",
    "enable_prompt_tokens_details",
    "enable_force_include_usage",
    "enable_request_id_headers",
    "disable_custom_all_reduce",
    "enable_dp_attention",
    "enable_torch_compile",
    "disable_radix_cache",
    "disable_prefill_cuda_graph",
    "trust_remote_code",
}
# ... except an engine's recipe_negated (on by default there): false is written --no-<flag>, or it would be lost
# what the plan writes itself (see recipe.OPTION_KEYS); distributed_executor_backend picks the vLLM mode
PLAN_KEYS = {
    "port",
    "host",
    "tensor_parallel",
    "pipeline_parallel",
    "gpu_memory_utilization",
    "max_model_len",
    "served_model_name",
    "trust_remote_code",
    "distributed_executor_backend",
}
# read by sparkrun itself (runtimes/base.py's portable and selector keys), not engine flags
SPARKRUN_KEYS = {
    "executor",
    "image_prefix",
    "launcher_image",
    "use_sentinel_image",
    "save_build_logs",
    "transformers",
    "kubectl",
    "benchmark_framework",
    "benchmark_output_dir",
    "init_port",
}
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
    eng = get_engine(engine)
    for key, value in defaults.items():
        key = str(key)
        if key in PLAN_KEYS or value is None:
            continue
        if key in SPARKRUN_KEYS:
            warnings.append(f"defaults.{key}: read by sparkrun itself, not an engine flag; not used by sparktui")
            continue
        if key not in KNOWN:
            warnings.append(f"defaults.{key}: no engine flag is known for it; not used")
            continue
        flag = eng.recipe_flags.get(key)
        if flag is None:
            warnings.append(f"defaults.{key}: {eng.label} has no flag for it; not used")
            continue
        if key in SWITCHES:
            on = switch(value)
            if on is None:
                warnings.append(f"defaults.{key}: {shorten(repr(value), 60)} is neither true nor false; not used")
            elif on:
                args.append(flag)
            elif key in eng.recipe_negated:
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
    for e in ENGINES.values():
        if got := e.resolve_recipe(runtime, builder, data, defaults, cmd):
            return got
    return runtime, builder, why
