"""What an engine release can do, by version, read from the releases themselves.

Each fact names the first release that has it, checked against that release's own source:
- vLLM's native multi-node flags (--nnodes, --node-rank, --master-addr, --master-port, --headless)
  first appear in vLLM 0.11.1's engine/arg_utils.py; 0.11.0 rejects them ("unrecognized arguments").
- vLLM's `--kv-cache-memory-bytes` (size the KV cache in bytes, not as a share of GPU memory) first appears in
  vLLM 0.10.2's engine/arg_utils.py (0.10.1.1 has none); `--max-model-len auto` (-1: fit the longest context
  the KV cache holds) in 0.14.0, whose arg_utils.py parses it with human_readable_int_or_auto (0.13.0 does not).
- SGLang's `sglang serve` (the `sglang` console script, sglang/cli/main.py) first ships in 0.5.5;
  0.5.4.post3 has neither the script nor sglang/cli, so older releases run `python3 -m sglang.launch_server`.
- SGLang's switch for its TP memory-balance check: `SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK` (default
  on; 0 turns it off) since 0.5.7; releases before read `SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=1`.
"""
from __future__ import annotations

import re

VLLM_NATIVE_SINCE = "0.11.1"
SGLANG_ENABLE_SWITCH_SINCE = "0.5.7"
SGLANG_SERVE_SINCE = "0.5.5"
VLLM_KV_BYTES_SINCE = "0.10.2"
VLLM_AUTO_LEN_SINCE = "0.14.0"


def parse(version: str) -> tuple[int, ...] | None:
    """'0.11.0', '0.5.3.post3', '0.12.0rc1+cu130', 'v0.9' -> (0, 11, 0) ...; None when unreadable."""
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version or "")
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def at_least(version: str | None, since: str) -> bool:
    """True when version is since or newer; an unknown version counts as new (the plan says so)."""
    v, s = parse(version or ""), parse(since)
    if v is None or s is None:
        return True
    n = max(len(v), len(s))
    return v + (0,) * (n - len(v)) >= s + (0,) * (n - len(s))


def vllm_native_refusal(version: str | None) -> str | None:
    """Why vLLM native mode cannot run on this release, with the way out; None when it can."""
    if version and not at_least(version, VLLM_NATIVE_SINCE):
        return (f"vLLM {version} in this image has no native multi-node mode (--nnodes/--headless came with "
                f"vLLM {VLLM_NATIVE_SINCE}): use --mode ray, or an image with vLLM {VLLM_NATIVE_SINCE} or newer")
    return None


def sglang_balance_switch(version: str | None) -> dict[str, str]:
    """The environment that turns off SGLang's memory-balance check in this release.

    Right after a copy the receiving node holds the checkpoint in page cache, which the GPU's free
    memory does not count on unified memory, so the ranks look unbalanced and SGLang refuses to
    start; sparktui checks free memory per node itself before launching.
    """
    if version and not at_least(version, SGLANG_ENABLE_SWITCH_SINCE):
        return {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1"}
    return {"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "0"}


def sglang_program(version: str | None) -> list[str]:
    """How this release starts a server: `sglang serve`, or the module before it had one."""
    if version and not at_least(version, SGLANG_SERVE_SINCE):
        return ["python3", "-m", "sglang.launch_server"]
    return ["sglang", "serve"]
