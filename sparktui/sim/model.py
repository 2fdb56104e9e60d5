"""What the engines learn from a checkpoint directory: config.json and the *.safetensors shards.

Shard contents are never read: a fixture may hold empty files. The checkpoint size comes from
model.safetensors.index.json's metadata.total_size when present (so a small fixture can stand for
a 118 GiB model), else from the shard file sizes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

GIB = 1024**3


class ModelNotFound(Exception):
    """The path is neither a directory with a config nor anything the engine could download."""


@dataclass
class ModelInfo:
    path: str
    config: dict = field(default_factory=dict)
    shards: list[str] = field(default_factory=list)
    total_bytes: int = 0

    def _get(self, *keys: str, default=None):
        for source in (self.config, self.config.get("text_config") or {}):
            for key in keys:
                if source.get(key) is not None:
                    return source[key]
        return default

    @property
    def architecture(self) -> str:
        archs = self.config.get("architectures") or ["LlamaForCausalLM"]
        return str(archs[0])

    @property
    def num_layers(self) -> int:
        return int(self._get("num_hidden_layers", "n_layer", "num_layers", default=32))

    @property
    def num_heads(self) -> int:
        return int(self._get("num_attention_heads", "n_head", default=32))

    @property
    def num_kv_heads(self) -> int:
        return int(self._get("num_key_value_heads", default=self.num_heads))

    @property
    def hidden_size(self) -> int:
        return int(self._get("hidden_size", "n_embd", default=4096))

    @property
    def head_dim(self) -> int:
        return int(self._get("head_dim", default=max(1, self.hidden_size // max(1, self.num_heads))))

    @property
    def max_position(self) -> int:
        return int(self._get("max_position_embeddings", "n_positions", default=32768))

    @property
    def dtype(self) -> str:
        return str(self._get("torch_dtype", "dtype", default="bfloat16")).replace("torch.", "")

    @property
    def quantization(self) -> str | None:
        q = self.config.get("quantization_config") or {}
        return q.get("quant_method") if isinstance(q, dict) else None

    def kv_bytes_per_token(self, tp: int) -> int:
        """K and V for one token on one tensor-parallel rank, 2 bytes per element."""
        kv_heads = max(1, self.num_kv_heads // max(1, tp))
        return 2 * self.num_layers * kv_heads * self.head_dim * 2


def load_model(path: str) -> ModelInfo:
    """Read `path` as the engines would; raises ModelNotFound when it is not a local directory."""
    if not path or not os.path.isdir(path):
        raise ModelNotFound(path)
    info = ModelInfo(path=path)
    cfg = os.path.join(path, "config.json")
    if os.path.isfile(cfg):
        try:
            with open(cfg, encoding="utf-8") as f:
                loaded = json.load(f)
            info.config = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            info.config = {}
    info.shards = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    sizes = 0
    for name in info.shards:
        try:
            sizes += os.path.getsize(os.path.join(path, name))
        except OSError:
            pass
    info.total_bytes = sizes
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as f:
                total = (json.load(f).get("metadata") or {}).get("total_size")
            if isinstance(total, (int, float)) and total > 0:
                info.total_bytes = int(total)
        except (OSError, ValueError, AttributeError):
            pass
    return info
