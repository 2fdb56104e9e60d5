"""The demo's model: a small checkpoint of real files that reads like a 30B mixture-of-experts one.

config.json carries what the engines and sparktui read (architecture, heads, layers, context);
the shards are valid safetensors files of random bytes (a few MiB each, so a sync copies real
data); model.safetensors.index.json states the full model's size, which the engine simulator
loads as if the weights were that big.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

NAME = "demo-moe-30b-a3b"
FULL_SIZE = 61_064_245_248  # bytes the index claims: 30.5B parameters in bf16
CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 40960,
    "vocab_size": 151936,
    "torch_dtype": "bfloat16",
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
}


def _safetensors(path: Path, tensor: str, size: int) -> None:
    """One tensor of `size` random bytes (bf16, so size is even) in the safetensors layout."""
    size -= size % 2
    header = json.dumps(
        {"__metadata__": {"format": "pt"}, tensor: {"dtype": "BF16", "shape": [size // 2], "data_offsets": [0, size]}}
    ).encode()
    header += b" " * (-len(header) % 8)  # the format pads the header to 8 bytes
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        left = size
        while left:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n


# The `unsupported` scenario's model: the seed's Qwen3.5 architecture (model type qwen3_5_moe, FP8), which the
# SGLang of lmsysorg/sglang:spark (0.5.3.post3, transformers 4.57.1) cannot load (sparktui/sim/support.py).
QWEN35 = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}


def write(dest: Path, total_bytes: int, shards: int = 4, config: dict | None = None) -> int:
    """Write the checkpoint into dest (created); returns the bytes written. config: fields over CONFIG."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps({**CONFIG, **(config or {})}, indent=2) + "\n")
    (dest / "generation_config.json").write_text(json.dumps({"temperature": 0.7, "top_p": 0.8, "top_k": 20}) + "\n")
    weight_map = {}
    per = max(2, total_bytes // shards)
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        tensor = f"model.layers.{(i - 1) * 48 // shards}.mlp.experts.weight"
        _safetensors(dest / name, tensor, per)
        weight_map[tensor] = name
    (dest / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": FULL_SIZE}, "weight_map": weight_map}, indent=2) + "\n"
    )
    return sum(p.stat().st_size for p in dest.iterdir() if p.is_file())
