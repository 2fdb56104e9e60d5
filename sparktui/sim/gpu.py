"""The simulated GPU: how much memory it has and how much of it the engines may use.

SPARKTUI_SIM_GPU_MEM_GIB (default 119.7, a DGX Spark's unified memory as CUDA reports it) and
SPARKTUI_SIM_GPUS (GPUs per node, default 1) describe each node.
"""

from __future__ import annotations

import os

from .model import GIB

RUNTIME_OVERHEAD_GIB = 1.6  # CUDA context, NCCL buffers and allocator slack seen before weights load
ACTIVATION_PEAK_GIB = 2.4  # what a profiling forward pass takes on top of the weights


def _float_env(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def total_gib() -> float:
    return _float_env("SPARKTUI_SIM_GPU_MEM_GIB", 119.7)


def gpus_per_node() -> int:
    try:
        return max(1, int(os.environ.get("SPARKTUI_SIM_GPUS", "") or 1))
    except ValueError:
        return 1


def weights_gib(total_bytes: int, tp: int, pp: int) -> float:
    """Weights one GPU holds: checkpoint bytes split across TP x PP."""
    return total_bytes / max(1, tp * pp) / GIB


class OutOfMemory(Exception):
    def __init__(self, tried_gib: float, free_gib: float, in_use_gib: float):
        self.tried_gib, self.free_gib, self.in_use_gib = tried_gib, free_gib, in_use_gib
        super().__init__(torch_oom_message(tried_gib, free_gib, in_use_gib))


def torch_oom_message(tried_gib: float, free_gib: float, in_use_gib: float, device: int = 0) -> str:
    total = total_gib()
    free = f"{free_gib * 1024:.2f} MiB" if free_gib < 1 else f"{free_gib:.2f} GiB"
    reserved = min(1.5, max(0.1, in_use_gib * 0.02))
    return (
        f"CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU {device} has a total capacity of "
        f"{total:.2f} GiB of which {free} is free. Including non-PyTorch memory, this process has "
        f"{in_use_gib:.2f} GiB memory in use. Of the allocated memory {in_use_gib - reserved:.2f} GiB is "
        f"allocated by PyTorch, and {reserved:.2f} GiB is reserved by PyTorch but unallocated. If reserved "
        "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
        "avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
