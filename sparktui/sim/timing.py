"""Simulated token timing: how long prefill and each decode step take for this model, TP, transport and load.

All of it is simulated, from a first-order model of a DGX Spark (no GPU is measured): decode is bound by
memory bandwidth (each step reads the active weights of one rank once), plus two all-reduces per layer
whose latency depends on the transport between the ranks; every request running beside it lengthens a
step a little (decode batches well); prefill is compute-bound and scales with TP. Figures:
- 273 GB/s LPDDR5x per Spark (NVIDIA DGX Spark datasheet), of which ~60 % is reached by decode kernels;
- all-reduce of one token's activations: ~0 within a node, ~30 us over RoCE (ConnectX-7, 200 Gb/s),
  ~150 us over TCP sockets (NCCL_IB_DISABLE=1);
- prefill ~2500 tokens/s per GPU on a ~10 B-active model.
A 122B MoE (10 B active) on TP=2 over RoCE comes out near 20 tokens/s, what two Sparks manage.
Times are engine seconds; clock.pause() divides them by SPARKTUI_SIM_SPEED.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

BANDWIDTH_GB_S = 273.0 * 0.6
ALLREDUCE_S = {"local": 0.0, "roce": 30e-6, "socket": 150e-6}
PREFILL_TOK_S_PER_10B = 2500.0
BATCH_COST = 0.02  # each extra running request adds 2 % to a decode step
ENGINE_FACTOR = {"vllm": 1.0, "sglang": 0.95}  # SGLang's decode loop is a little leaner at small batch


@dataclass(frozen=True)
class TokenTiming:
    decode_s: float  # one decode step with a single request running
    prefill_tok_s: float

    def step(self, running: int) -> float:
        return self.decode_s * (1.0 + BATCH_COST * max(0, running - 1))

    def prefill(self, tokens: int) -> float:
        return 0.02 + tokens / self.prefill_tok_s


DEFAULT = TokenTiming(decode_s=0.05, prefill_tok_s=2500.0)  # 20 tokens/s: a 122B MoE on two Sparks


def transport(nnodes: int, env: dict | None = None) -> str:
    """How the ranks talk: within one node, RoCE (NCCL's IB transport), or TCP when IB is disabled."""
    env = os.environ if env is None else env
    if nnodes <= 1:
        return "local"
    return "socket" if str(env.get("NCCL_IB_DISABLE", "")).strip() == "1" else "roce"


def active_bytes(total_bytes: int, config: dict) -> float:
    """Weight bytes one token reads: all of a dense model, the routed share of an MoE's experts."""
    cfg = dict(config.get("text_config") or {}, **{k: v for k, v in config.items() if k != "text_config"})
    experts = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
    per_tok = cfg.get("num_experts_per_tok") or cfg.get("moe_topk")
    if isinstance(experts, int) and isinstance(per_tok, int) and experts > per_tok > 0:
        # experts hold ~90 % of an MoE's weights; attention, embeddings and shared parts are always read
        return total_bytes * (0.1 + 0.9 * per_tok / experts)
    return float(total_bytes)


def timing_for(kind: str, total_bytes: int, config: dict, layers: int, tp: int, nnodes: int,
               env: dict | None = None) -> TokenTiming:
    if total_bytes <= 0:
        return DEFAULT
    tp = max(1, tp)
    active = active_bytes(total_bytes, config)
    read_s = active / tp / (BANDWIDTH_GB_S * 1e9)
    comm_s = 2 * max(1, layers) * ALLREDUCE_S[transport(nnodes, env)] if tp > 1 else 0.0
    decode = (read_s + comm_s) * ENGINE_FACTOR.get(kind, 1.0)
    prefill = PREFILL_TOK_S_PER_10B * tp * 10e9 * 2 / max(active, 1e9)  # bf16: two bytes a parameter
    return TokenTiming(decode_s=max(0.002, decode), prefill_tok_s=prefill)
