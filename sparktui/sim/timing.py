"""Simulated token timing: how long prefill and each decode step take for this model, TP, transport and load.

All of it is simulated, from a first-order model of a DGX Spark (no GPU is measured): decode is bound by
memory bandwidth (each step reads the active weights of one rank once), plus two all-reduces per layer
whose latency depends on the transport between the ranks; every request running beside it lengthens a
step a little (decode batches well); prefill is compute-bound and scales with TP. Figures:
- 273 GB/s LPDDR5x per Spark (NVIDIA DGX Spark datasheet), of which ~60 % is reached by decode kernels;
- all-reduce of one token's activations: ~0 within a node, ~30 us over RoCE (ConnectX-7, 200 Gb/s),
  ~150 us over TCP sockets (NCCL_IB_DISABLE=1);
- prefill ~2500 tokens/s per GPU on a ~10 B-active model, plus its all-reduces at the fabric's bus bandwidth;
- bus bandwidth over RoCE by port halves in NCCL_IB_HCA and MTU (fabric_env learns both as NCCL does):
  one half ~98 Gb/s, both ~161 Gb/s (tonyd2wild/DeepSeek-v4-Flash-Vision-Exp-DSpark-1M-NVFP4-KV-2x-DGX-Spark#35);
  MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#104 measured prefill 1311 tok/s (MTU 1500, one half),
  1343 (MTU 9000, one half), 1410 (MTU 9000, both) with decode unchanged: fitting
  prefill_s = compute_s * (1 + COMM_GBPS / busbw) to those three gives COMM_GBPS 13.5 and, at MTU 1500,
  ~83 % of the MTU 9000 bus bandwidth. Decode's all-reduces are latency-bound, so halves and MTU leave it be.
A 122B MoE (10 B active) on TP=2 over RoCE comes out near 20 tokens/s, what two Sparks manage.
Times are engine seconds; clock.pause() divides them by SPARKTUI_SIM_SPEED.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .fabric_env import FabricPath, fabric_path

BANDWIDTH_GB_S = 273.0 * 0.6
ALLREDUCE_S = {"local": 0.0, "roce": 30e-6, "socket": 150e-6}
PREFILL_TOK_S_PER_10B = 2500.0
BATCH_COST = 0.02  # each extra running request adds 2 % to a decode step
BUSBW_GBPS = {1: 98.0, 2: 161.0}  # RoCE at MTU 9000 by halves in use (sources above)
MTU_SMALL = 0.83  # the bus bandwidth's share left below MTU 9000 (fitted above)
SOCKET_BUSBW_GBPS = 25.0  # NCCL over TCP sockets: a first-order figure, no GPU Direct, one stream per channel
COMM_GBPS = 13.5  # prefill's all-reduce time against compute is COMM_GBPS / busbw (fitted above)
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


def busbw_gbps(path: FabricPath) -> float | None:
    """The all-reduce bus bandwidth between the nodes in Gb/s; None within one node."""
    if path.transport == "local":
        return None
    if path.transport == "socket":
        return SOCKET_BUSBW_GBPS
    bw = BUSBW_GBPS[1] if path.halves <= 1 else BUSBW_GBPS[2] * path.halves / 2
    return bw * (MTU_SMALL if path.mtu is not None and path.mtu < 9000 else 1.0)


def active_bytes(total_bytes: int, config: dict) -> float:
    """Weight bytes one token reads: all of a dense model, the routed share of an MoE's experts."""
    cfg = dict(config.get("text_config") or {}, **{k: v for k, v in config.items() if k != "text_config"})
    experts = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
    per_tok = cfg.get("num_experts_per_tok") or cfg.get("moe_topk")
    if isinstance(experts, int) and isinstance(per_tok, int) and experts > per_tok > 0:
        # experts hold ~90 % of an MoE's weights; attention, embeddings and shared parts are always read
        return total_bytes * (0.1 + 0.9 * per_tok / experts)
    return float(total_bytes)


def timing_for(
    kind: str,
    total_bytes: int,
    config: dict,
    layers: int,
    tp: int,
    nnodes: int,
    env: dict | None = None,
    path: FabricPath | None = None,
) -> TokenTiming:
    if total_bytes <= 0:
        return DEFAULT
    tp = max(1, tp)
    path = path or fabric_path(nnodes, env)
    active = active_bytes(total_bytes, config)
    read_s = active / tp / (BANDWIDTH_GB_S * 1e9)
    comm_s = 2 * max(1, layers) * ALLREDUCE_S[path.transport] if tp > 1 else 0.0
    decode = (read_s + comm_s) * ENGINE_FACTOR.get(kind, 1.0)
    prefill = PREFILL_TOK_S_PER_10B * tp * 10e9 * 2 / max(active, 1e9)  # bf16: two bytes a parameter
    bw = busbw_gbps(path) if tp > 1 else None
    if bw:
        prefill /= 1.0 + COMM_GBPS / bw
    return TokenTiming(decode_s=max(0.002, decode), prefill_tok_s=prefill)
