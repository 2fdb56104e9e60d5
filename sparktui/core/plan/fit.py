"""Will the model fit? Weights per GPU against the memory the engine may use, before anything loads.

weights per GPU = (checkpoint bytes - replicated) / (TP x PP) + replicated / PP
budget per GPU  = usable memory per GPU x memory fraction   (unified memory on GB10: MemTotal)
Replicated parameters are held whole by every GPU of a stage: the RMSNorm weights and, for MoE, each
layer's router (both engines build it as a ReplicatedLinear); embeddings and lm_head are split over the
vocabulary (VocabParallelEmbedding / ParallelLMHead) except in SGLang with --enable-dp-attention. They
are counted from the model's config.json; without it a 3 % allowance on the weights is added.
What the fraction covers differs, as the engines' own help says:
- vLLM --gpu-memory-utilization: "the fraction of GPU memory to be used for the model executor" (vllm
  config/cache.py CacheConfig.gpu_memory_utilization): weights, activations and KV cache all inside it,
  so KV = budget - weights - runtime overhead;
- SGLang --mem-fraction-static: "the fraction of the memory used for static allocation (model weights
  and KV cache memory pool)" (python/sglang/srt/server_args.py): activations and CUDA graphs live in
  the rest, so KV = budget - weights, and the memory outside the budget must hold the overhead.
The overhead (CUDA context, activations, CUDA graphs, NCCL buffers) is an estimate: a few GiB on the
engines seen on Sparks, so 3 GiB is assumed. Weights above the budget are an error; KV room under 10 %
of memory a warning (little KV cache: short contexts, few concurrent requests).

After load (after_load), per node: on unified memory (GB10) and on a node without a GPU the engine's share
comes out of the same MemTotal the OS lives on. About ten seconds after the weights load, the KV cache and
the allocator take the rest of the budget, and MemAvailable drops by that much; below the `memory.floor` the
host can wedge until a power cycle. What stays is
    left = MemTotal - HOST_RESERVE - what the engine holds [- FRAGMENTATION without expandable segments]
what the engine holds: fraction x MemTotal (vLLM), + the activations outside it (SGLang); weights +
activations + fraction x what is free after them (TensorRT-LLM); weights + activations + the KV bytes when a
flag sizes the KV cache (vLLM --kv-cache-memory-bytes). HOST_RESERVE (OS, container runtime, the engine's
Python processes and CUDA context) and FRAGMENTATION (blocks PyTorch's caching allocator reserves and does
not use; users measured 6-7 GiB back with expandable_segments:True) are estimates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import math
import re

from ..engines import ENGINES
from ..nodes.facts import NodeFacts
from ..memory.limits import amount_bytes

GIB = 1024**3
RUNTIME_OVERHEAD = 3 * GIB
LOW_HEADROOM = 0.10  # of usable memory per GPU
REPLICATED_ALLOWANCE = 0.03  # of the weights, when the model's config.json is not at hand
# NVIDIA's DGX Spark examples (REFERENCE.md): the fraction used when neither the user nor the config sets one,
# per engine (Engine.fit_fraction); what it covers (Engine.fit_covers)
NVIDIA_FRACTION = {e.name: e.fit_fraction for e in ENGINES.values()}
COVERS = {e.name: e.fit_covers for e in ENGINES.values()}
# an estimate made without naming the engine reads the budget the way this one does (activations inside)
_BUDGET_READER = next(e.name for e in ENGINES.values() if e.activations_in_budget)
HOST_RESERVE = 10 * GIB  # held outside the engine's budget on a node: OS, runtime, the engine's own processes
FRAGMENTATION = 6 * GIB  # reserved but unused by PyTorch's caching allocator, without expandable segments
_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


def default_fraction(engine: str, configured: float | None = None) -> float:
    """The memory fraction a plan uses when the user gave none: the config's, else NVIDIA's for the engine."""
    return configured if configured is not None else NVIDIA_FRACTION.get(engine, 0.8)


def gib(n: int | None) -> str:
    """GiB with one decimal; below 0.1 GiB in MiB, so a small model never reads as 0.0 GiB."""
    if n is None:
        return "?"
    if 0 < n < GIB / 10:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / GIB:.1f} GiB"


def _int(cfg: dict, *keys: str) -> int:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 0


def _moe_layers(layers: int, first: int, step: int, mlp_only: object) -> int:
    """Layers i in [first, layers) with (i + 1) % step == 0 and not in mlp_only, counted in closed form:
    the counts come from config.json, so nothing here loops over them."""
    sparse = layers // step - first // step  # multiples of step in [first + 1, layers]
    dense = {i for i in mlp_only if type(i) is int} if isinstance(mlp_only, list) else set()  # [[1]]: not a layer
    return sparse - sum(1 for i in dense if first <= i < layers and (i + 1) % step == 0)


def replicated_params(model_config: dict, engine: str, extra_args: list[str] | None = None) -> tuple[int, str]:
    """(bytes every GPU of a stage holds whole, what they are) from a config.json; (0, why) when unreadable."""
    cfg = model_config.get("text_config") if isinstance(model_config.get("text_config"), dict) else model_config
    hidden, layers, vocab = _int(cfg, "hidden_size"), _int(cfg, "num_hidden_layers"), _int(cfg, "vocab_size")
    if not hidden or not layers:
        return 0, "config.json names no hidden_size / num_hidden_layers"
    size = _DTYPE_BYTES.get(
        str(cfg.get("torch_dtype") or cfg.get("dtype") or model_config.get("torch_dtype") or "bfloat16").removeprefix(
            "torch."
        ),
        2,
    )
    parts = {"norms": (2 * layers + 1) * hidden}  # input + post-attention norm per layer, the final norm
    experts = _int(cfg, "num_experts", "num_local_experts", "n_routed_experts")
    if experts:
        step = _int(cfg, "decoder_sparse_step") or 1
        first = min(_int(cfg, "first_k_dense_replace"), layers)
        moe = _moe_layers(layers, first, step, cfg.get("mlp_only_layers"))
        shared = hidden if _int(cfg, "shared_expert_intermediate_size") else 0  # shared_expert_gate: hidden -> 1
        parts["router"] = moe * (experts * hidden + shared)
    eng = ENGINES.get(engine)
    flag = eng.embeddings_replicated_by if eng else None
    if flag and flag in (extra_args or []) and vocab:
        copies = 1 if model_config.get("tie_word_embeddings", cfg.get("tie_word_embeddings")) else 2
        parts["embeddings" if copies == 1 else "embeddings + lm_head"] = copies * vocab * hidden
    return sum(parts.values()) * size, " + ".join(parts)


@dataclass
class Fit:
    """The estimate and what it means; None fields are unknown."""

    tp: int
    pp: int
    mem_fraction: float
    engine: str = _BUDGET_READER
    checkpoint_bytes: int | None = None
    replicated_bytes: int = 0  # per GPU above an even split: parameters every GPU of a stage holds whole
    replicated_what: str = ""  # what they are, or how they were allowed for
    weights_per_gpu: int | None = None
    memory_per_gpu: int | None = None  # usable memory of the tightest node's GPU
    tightest_node: str | None = None
    budget_per_gpu: int | None = None  # memory_per_gpu x mem_fraction
    overhead_bytes: int = RUNTIME_OVERHEAD
    headroom_bytes: int | None = None  # left for the KV cache on each GPU
    kv_bytes: int | None = None  # the KV cache asked in bytes (kv_flag): it, not the fraction, sizes the cache
    kv_flag: str | None = None
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

    @property
    def covers(self) -> str:
        """What the fraction covers, in the engine's terms."""
        return COVERS.get(self.engine, "weights and KV cache")

    @property
    def overhead_inside(self) -> bool:
        """Does the budget hold the activations too (vLLM), or do they live outside it (SGLang)?"""
        eng = ENGINES.get(self.engine)
        return eng.activations_in_budget if eng else True

    def summary(self) -> str:
        if not self.known:
            return "fit unknown: " + "; ".join(self.warnings or ["missing sizes"])
        rep = f" (+{gib(self.replicated_bytes)} replicated)" if self.replicated_bytes else ""
        over = f" + ~{gib(self.overhead_bytes)} activations" if self.overhead_inside else ""
        if self.kv_bytes is not None:
            return (
                f"weights {gib(self.weights_per_gpu)}/GPU{rep}{over} + KV cache {gib(self.kv_bytes)} "
                f"({self.kv_flag}) = {gib(self.budget_per_gpu)} of {gib(self.memory_per_gpu)}"
            )
        return (
            f"weights {gib(self.weights_per_gpu)}/GPU{rep}{over} in {gib(self.budget_per_gpu)} "
            f"= {self.mem_fraction:g} x {gib(self.memory_per_gpu)} ({self.covers}); "
            f"KV cache {gib(self.headroom_bytes)}"
        )

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(known=self.known, ok=self.ok, headroom_ratio=self.headroom_ratio, covers=self.covers)
        return d


def estimate_fit(
    checkpoint_bytes: int | None,
    memory_per_gpu: dict[str, int | None],
    tp: int,
    pp: int,
    mem_fraction: float,
    overhead_bytes: int = RUNTIME_OVERHEAD,
    engine: str = _BUDGET_READER,
    replicated: tuple[int, str] | None = None,
    kv: tuple[int, str] | None = None,
) -> Fit:
    """memory_per_gpu: node -> usable bytes for one of its GPUs (None = unknown);
    replicated: (bytes, what) from replicated_params, or None for the 3 % allowance;
    kv: (bytes, flag) where the KV cache is sized in bytes rather than by the fraction."""
    f = Fit(
        tp=tp,
        pp=pp,
        mem_fraction=mem_fraction,
        engine=engine,
        checkpoint_bytes=checkpoint_bytes,
        overhead_bytes=overhead_bytes,
    )
    if kv is not None:
        f.kv_bytes, f.kv_flag = kv
    shards = tp * pp
    if shards < 1:
        f.errors.append("TP x PP must be at least 1")
        return f
    if checkpoint_bytes is None:
        f.warnings.append("checkpoint size unknown (model directory not measured)")
    elif replicated is None or tp == 1:
        split = -(-checkpoint_bytes // shards)  # ceiling: a shard never rounds down
        f.replicated_bytes = int(split * REPLICATED_ALLOWANCE) if tp > 1 else 0
        f.replicated_what = f"{REPLICATED_ALLOWANCE:.0%} allowance (no config.json)" if tp > 1 else ""
        f.weights_per_gpu = split + f.replicated_bytes
    else:
        whole = min(replicated[0], checkpoint_bytes)
        f.replicated_what = replicated[1]
        f.weights_per_gpu = -(-(checkpoint_bytes - whole) // shards) + -(-whole // pp)
        f.replicated_bytes = f.weights_per_gpu - -(-checkpoint_bytes // shards)  # more than an even split
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
    if f.kv_bytes is not None:
        return _fit_kv_bytes(f)
    inside = overhead_bytes if f.overhead_inside else 0
    f.headroom_bytes = f.budget_per_gpu - f.weights_per_gpu - inside
    where = f" on {f.tightest_node}" if f.tightest_node else ""
    if f.weights_per_gpu > f.budget_per_gpu:
        f.errors.append(
            f"weights alone do not fit: {gib(f.weights_per_gpu)} per GPU (TP {tp} x PP {pp}) but only "
            f"{gib(f.budget_per_gpu)} usable{where} ({mem_fraction:g} of {gib(f.memory_per_gpu)}, {f.covers}); "
            f"use more GPUs or raise the memory fraction"
        )
    elif f.headroom_bytes <= 0:
        f.warnings.append(
            f"no room left for the KV cache{where}: {gib(f.weights_per_gpu)} weights"
            f"{f' + ~{gib(overhead_bytes)} activations' if inside else ''} in {gib(f.budget_per_gpu)} "
            f"({f.covers}); the engine will likely refuse to start"
        )
    elif f.headroom_bytes < LOW_HEADROOM * f.memory_per_gpu:
        f.warnings.append(
            f"little KV cache headroom{where}: {gib(f.headroom_bytes)} per GPU (under "
            f"{LOW_HEADROOM:.0%} of {gib(f.memory_per_gpu)}); expect short contexts or few concurrent requests"
        )
    outside = f.memory_per_gpu - f.budget_per_gpu
    if not f.overhead_inside and outside < overhead_bytes:
        f.warnings.append(
            f"only {gib(outside)} per GPU outside --mem-fraction-static {mem_fraction:g}{where} for activations "
            f"and CUDA graphs (~{gib(overhead_bytes)} expected); lower the fraction if it runs out of memory"
        )
    return f


def _fit_kv_bytes(f: Fit) -> Fit:
    """The KV cache sized in bytes: the engine holds the weights, activations and that cache, whatever the
    fraction, so the sum must fit in a GPU's memory."""
    assert f.kv_bytes is not None and f.weights_per_gpu is not None and f.memory_per_gpu is not None
    inside = f.overhead_bytes if f.overhead_inside else 0
    f.headroom_bytes = f.kv_bytes
    f.budget_per_gpu = f.weights_per_gpu + inside + f.kv_bytes
    if f.budget_per_gpu > f.memory_per_gpu:
        where = f" on {f.tightest_node}" if f.tightest_node else ""
        f.errors.append(
            f"weights {gib(f.weights_per_gpu)} + KV cache {gib(f.kv_bytes)} ({f.kv_flag}) per GPU (TP {f.tp} x PP "
            f"{f.pp}) exceed the {gib(f.memory_per_gpu)} usable{where}; use more GPUs or a smaller KV cache"
        )
    return f


def fit_from_facts(
    facts: dict[str, NodeFacts],
    nodes: list[str],
    checkpoint_bytes: int | None,
    tp: int,
    pp: int,
    mem_fraction: float,
    overhead_bytes: int = RUNTIME_OVERHEAD,
    engine: str = _BUDGET_READER,
    model_config: dict | None = None,
    extra_args: list[str] | None = None,
) -> Fit:
    """The estimate for the nodes of a plan, from what the probes found (and the model's config.json)."""
    mem = {n: (facts[n].usable_gpu_memory() if n in facts else None) for n in nodes}
    rep = replicated_params(model_config, engine, extra_args) if isinstance(model_config, dict) else None
    if rep is not None and not rep[0]:
        rep = None  # config.json without the sizes: the allowance instead
    eng = ENGINES.get(engine)
    flag = eng.kv_bytes_flag if eng is not None else None
    kv = kv_bytes_arg(extra_args, flag)
    return estimate_fit(
        checkpoint_bytes,
        mem,
        tp,
        pp,
        mem_fraction,
        overhead_bytes,
        engine,
        rep,
        (kv, flag) if kv is not None and flag else None,
    )


@dataclass
class NodeRoom:
    """What one node keeps once the engine has loaded and taken its KV cache, against the floor."""

    node: str
    total: int  # MemTotal
    held: int  # what the engine holds once loaded
    reserve: int  # held outside the engine: HOST_RESERVE (+ FRAGMENTATION without expandable segments)
    floor: int
    fraction: float
    flag: str  # the engine's flag for the fraction
    suggest: float | None = None  # the fraction that leaves the floor (None: none does)
    kv_bytes: int | None = None  # the KV cache's size when a flag gives it
    kv_suggest: int | None = None  # the KV size that leaves the floor
    kv_flag: str | None = None
    expandable_hint: bool = False  # expandable segments are off where the engine would honour them

    @property
    def left(self) -> int:
        return self.total - self.reserve - self.held

    @property
    def short(self) -> bool:
        return self.left < self.floor

    def message(self) -> str:
        parts = f"the engine ~{gib(self.held)}, OS and runtime ~{gib(self.reserve)}"
        if self.left > 0:
            head = (
                f"{self.node}: about {gib(self.left)} of its {gib(self.total)} left after load ({parts}), "
                f"under the {gib(self.floor)} floor below which the host can wedge"
            )
        else:
            head = (
                f"{self.node}: after load {parts} would want {gib(-self.left)} more than its {gib(self.total)}; "
                f"the host can wedge below the {gib(self.floor)} floor"
            )
        ways = []
        if self.kv_bytes is not None and self.kv_flag:
            ways.append(
                f"{self.kv_flag} {gib(self.kv_bytes)} -> {gib(self.kv_suggest)}"
                if self.kv_suggest
                else f"{self.kv_flag} {gib(self.kv_bytes)} leaves too little even at zero"
            )
        elif self.suggest is not None:
            ways.append(f"{self.flag} {self.fraction:.2f} -> {self.suggest:.2f}")
        elif self.kv_bytes is None:
            ways.append(f"no {self.flag} leaves the floor: use more nodes or a smaller model")
        if self.expandable_hint:
            ways.append(f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (about {gib(FRAGMENTATION)} back)")
        if self.kv_bytes is None and self.kv_flag:
            ways.append(f"or size the KV cache with {self.kv_flag}")
        return f"{head}: {'; '.join(ways)}"

    def to_json(self) -> dict:
        return {**asdict(self), "left": self.left, "short": self.short}


_KV_UNITS = {
    "": 1,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "K": 1024,
    "M": 1024**2,
    "G": 1024**3,
    "T": 1024**4,
}


def kv_bytes_arg(extra_args: list | None, flag: str | None) -> int | None:
    """The byte count given to `flag` among the engine's extra arguments (vLLM's human-readable ints: 20G
    binary, 20g decimal, or plain bytes); None when absent or unreadable."""
    if not flag:
        return None
    words = [str(w) for w in extra_args or ()]
    for i, w in enumerate(words):
        value = (
            w.split("=", 1)[1]
            if w.startswith(flag + "=")
            else (words[i + 1] if w == flag and i + 1 < len(words) else None)
        )
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)i?[bB]?\s*", value or "")
        if m:
            return int(float(m.group(1)) * _KV_UNITS[m.group(2)])
    return None


def host_bound(f: NodeFacts) -> bool:
    """Does the engine's share come out of the node's system memory: unified memory (GB10), or no GPU?"""
    return f.gpu.unified or (f.gpu.count == 0 and not f.gpu.memory_total_bytes)


def after_load(
    facts: dict[str, NodeFacts],
    nodes: list[str],
    *,
    engine: str,
    fraction: float,
    floor: str,
    weights_per_gpu: int | None = None,
    expandable: bool = False,
    extra_args: list | None = None,
) -> list[NodeRoom]:
    """Each node whose memory the engine shares with the OS, with MemTotal known: what stays after load."""
    eng = ENGINES.get(engine)
    if eng is None:
        return []
    flag = eng.flag("mem_fraction") or eng.fraction_flag or "the memory fraction"
    kv = kv_bytes_arg(extra_args, eng.kv_bytes_flag)
    frag = FRAGMENTATION if eng.torch_allocator and not expandable else 0
    outside = 0 if eng.activations_in_budget else RUNTIME_OVERHEAD
    out = []
    for name in nodes:
        f = facts.get(name)
        total = f.memory.total_bytes if f is not None else None
        if f is None or not total or not host_bound(f):
            continue
        gpus = max(f.gpu.count, 1)
        reserve = HOST_RESERVE + frag
        room = NodeRoom(
            name,
            total,
            0,
            reserve,
            amount_bytes(floor, total) or 0,
            fraction,
            flag,
            kv_bytes=kv,
            kv_flag=eng.kv_bytes_flag,
            expandable_hint=bool(frag),
        )
        if kv is not None or eng.fraction_of_free:
            if weights_per_gpu is None:
                continue  # both depend on the weights: unknown, nothing to say
            fixed = weights_per_gpu + RUNTIME_OVERHEAD
            if kv is not None:
                room.held = gpus * (fixed + kv)
                spare = kv - (room.floor - room.left) // gpus
                room.kv_suggest = spare if spare > 0 else None
            else:
                free = total // gpus - reserve - fixed  # per GPU, after the weights and activations
                room.held = gpus * (fixed + int(fraction * max(free, 0)))
                room.suggest = _down(1 - room.floor / (gpus * free)) if free > 0 else None
        else:
            room.held = int(gpus * (fraction * total / gpus + outside))
            room.suggest = _down((total - reserve - room.floor - gpus * outside) / total)
        if room.suggest is not None and not 0 < room.suggest < fraction:
            room.suggest = None
        out.append(room)
    return out


def _down(x: float) -> float | None:
    """Two decimals, rounded down (a suggestion never overshoots); None when nothing above zero works."""
    v = math.floor(x * 100 + 1e-9) / 100
    return v if v > 0 else None
