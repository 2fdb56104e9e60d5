"""vLLM's copy of the driver's environment to its Ray workers, as vllm/ray/ray_env.py does it.

The driver (vllm serve in the head container) sends every worker the values of its registered VLLM_
variables and of every variable under the NCCL_, UCX_, VLLM_, HF_ ... prefixes, except the
worker-specific ones and the names listed in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json. A
worker on a node whose fabric interface has another name then gets the head's name.
"""

from __future__ import annotations

import json
import os

PREFIXES = ("VLLM_", "FLASH_ATTENTION_", "LMCACHE_", "NCCL_", "UCX_", "HF_", "HUGGING_FACE_")
WORKER_SPECIFIC = {
    "VLLM_HOST_IP",
    "VLLM_HOST_PORT",
    "VLLM_NIXL_SIDE_CHANNEL_HOST",
    "LOCAL_RANK",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
}
FILE = "ray_non_carry_over_env_vars.json"


def config_file(environ=os.environ) -> str:
    root = environ.get("VLLM_CONFIG_ROOT") or os.path.join(
        environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".config"),
        "vllm",
    )
    return os.path.join(root, FILE)


def non_carry_over(environ=os.environ) -> tuple[set[str], str | None]:
    """The listed names, and a warning when the file is there but unreadable as a JSON list."""
    path = config_file(environ)
    try:
        with open(path, encoding="utf-8") as f:
            names = json.load(f)
    except FileNotFoundError:
        return set(), None
    except (OSError, ValueError):
        return set(), f"Failed to parse {path}. Using an empty set for non-carry-over env vars."
    return {str(n) for n in names} if isinstance(names, list) else set(), None


def copied(environ=os.environ) -> set[str]:
    """Names whose driver values every Ray worker gets."""
    skip, _ = non_carry_over(environ)
    return {k for k in environ if k.startswith(PREFIXES)} - WORKER_SPECIFIC - skip


def worker_ifname(node: dict, environ=os.environ) -> str | None:
    """The NCCL_SOCKET_IFNAME a Ray worker on `node` runs with."""
    if "NCCL_SOCKET_IFNAME" in copied(environ):
        return environ["NCCL_SOCKET_IFNAME"]
    return (node.get("env") or {}).get("NCCL_SOCKET_IFNAME")


def ifname_matches(spec: str, names: list[str]) -> bool:
    """Whether NCCL_SOCKET_IFNAME selects any of the node's interfaces (NCCL's rules: a comma list of
    prefixes; `=` makes them exact names, `^` excludes them)."""
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    wanted = [w for w in spec.lstrip("=").split(",") if w]

    def hit(n: str) -> bool:
        return any(n == w if exact else n.startswith(w) for w in wanted)

    return any(not hit(n) for n in names) if exclude else any(hit(n) for n in names)
