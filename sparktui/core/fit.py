"""Will the model fit? Weights per GPU against the memory the engine may use, before anything loads.

weights per GPU = checkpoint bytes on disk / (TP x PP)
budget per GPU  = usable memory per GPU x memory fraction   (unified memory on GB10: MemTotal)
KV headroom     = budget - weights - runtime overhead
The overhead (CUDA context, activations, CUDA graphs, NCCL buffers) is an estimate: a few GiB on
the engines seen on Sparks, so 3 GiB is assumed. Weights above the budget are an error; headroom
under 10 % of memory a warning (little KV cache: short contexts, few concurrent requests).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .facts import NodeFacts

GIB = 1024**3
RUNTIME_OVERHEAD = 3 * GIB
LOW_HEADROOM = 0.10  # of usable memory per GPU


def gib(n: int | None) -> str:
    """GiB with one decimal; below 0.1 GiB in MiB, so a small model never reads as 0.0 GiB."""
    if n is None:
        return "?"
    if 0 < n < GIB / 10:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / GIB:.1f} GiB"


@dataclass
class Fit:
    """The estimate and what it means; None fields are unknown."""

    tp: int
    pp: int
    mem_fraction: float
    checkpoint_bytes: int | None = None
    weights_per_gpu: int | None = None
    memory_per_gpu: int | None = None  # usable memory of the tightest node's GPU
    tightest_node: str | None = None
    budget_per_gpu: int | None = None  # memory_per_gpu x mem_fraction
    overhead_bytes: int = RUNTIME_OVERHEAD
    headroom_bytes: int | None = None  # left for the KV cache on each GPU
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return self.headroom_bytes is not None

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def headroom_ratio(self) -> float | None:
        if self.headroom_bytes is None or not self.memory_per_gpu:
            return None
        return self.headroom_bytes / self.memory_per_gpu

    def summary(self) -> str:
        if not self.known:
            return "fit unknown: " + "; ".join(self.warnings or ["missing sizes"])
        return (f"weights {gib(self.weights_per_gpu)}/GPU of {gib(self.budget_per_gpu)} usable "
                f"({self.mem_fraction:g} x {gib(self.memory_per_gpu)}), overhead ~{gib(self.overhead_bytes)}, "
                f"KV headroom {gib(self.headroom_bytes)}")

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(known=self.known, ok=self.ok, headroom_ratio=self.headroom_ratio)
        return d


def estimate_fit(checkpoint_bytes: int | None, memory_per_gpu: dict[str, int | None], tp: int, pp: int,
                 mem_fraction: float, overhead_bytes: int = RUNTIME_OVERHEAD) -> Fit:
    """memory_per_gpu: node -> usable bytes for one of its GPUs (None = unknown)."""
    f = Fit(tp=tp, pp=pp, mem_fraction=mem_fraction, checkpoint_bytes=checkpoint_bytes,
            overhead_bytes=overhead_bytes)
    shards = tp * pp
    if shards < 1:
        f.errors.append("TP x PP must be at least 1")
        return f
    if checkpoint_bytes is None:
        f.warnings.append("checkpoint size unknown (model directory not measured)")
    else:
        f.weights_per_gpu = -(-checkpoint_bytes // shards)  # ceiling: a shard never rounds down
    unknown = [n for n, m in memory_per_gpu.items() if not m]
    known = {n: m for n, m in memory_per_gpu.items() if m}
    if unknown:
        f.warnings.append(f"GPU memory unknown on {', '.join(unknown)}")
    if known:
        f.tightest_node = min(known, key=lambda n: known[n])
        f.memory_per_gpu = known[f.tightest_node]
        f.budget_per_gpu = int(f.memory_per_gpu * mem_fraction)
    if f.weights_per_gpu is None or f.budget_per_gpu is None:
        return f
    f.headroom_bytes = f.budget_per_gpu - f.weights_per_gpu - overhead_bytes
    where = f" on {f.tightest_node}" if f.tightest_node else ""
    if f.weights_per_gpu > f.budget_per_gpu:
        f.errors.append(
            f"weights alone do not fit: {gib(f.weights_per_gpu)} per GPU (TP {tp} x PP {pp}) but only "
            f"{gib(f.budget_per_gpu)} usable{where} ({mem_fraction:g} of {gib(f.memory_per_gpu)}); "
            f"use more GPUs or raise the memory fraction")
    elif f.headroom_bytes <= 0:
        f.warnings.append(
            f"no room left for the KV cache{where}: {gib(f.weights_per_gpu)} weights + ~{gib(overhead_bytes)} "
            f"overhead in {gib(f.budget_per_gpu)}; the engine will likely refuse to start")
    elif f.headroom_bytes < LOW_HEADROOM * f.memory_per_gpu:
        f.warnings.append(
            f"little KV cache headroom{where}: {gib(f.headroom_bytes)} per GPU (under "
            f"{LOW_HEADROOM:.0%} of {gib(f.memory_per_gpu)}); expect short contexts or few concurrent requests")
    return f


def fit_from_facts(facts: dict[str, NodeFacts], nodes: list[str], checkpoint_bytes: int | None, tp: int, pp: int,
                   mem_fraction: float, overhead_bytes: int = RUNTIME_OVERHEAD) -> Fit:
    """The estimate for the nodes of a plan, from what the probes found."""
    mem = {n: (facts[n].usable_gpu_memory() if n in facts else None) for n in nodes}
    return estimate_fit(checkpoint_bytes, mem, tp, pp, mem_fraction, overhead_bytes)
