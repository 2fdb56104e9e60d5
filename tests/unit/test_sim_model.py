"""What the simulated engines read from a checkpoint directory, and the memory figures they derive."""

from __future__ import annotations

import json

import pytest

from sparktui.sim import gpu
from sparktui.sim.model import GIB, ModelNotFound, load_model
from tests.simhelpers import make_model


def test_index_total_size_stands_for_the_checkpoint_size(tmp_path):
    path = make_model(
        tmp_path / "m",
        shards=3,
        total_bytes=118 * GIB,
        config={"num_hidden_layers": 10, "num_key_value_heads": 8, "head_dim": 64},
    )
    m = load_model(str(path))
    assert len(m.shards) == 3
    assert m.total_bytes == 118 * GIB
    assert m.architecture == "Qwen3MoeForCausalLM"
    # K and V, 10 layers, 8/2 heads per rank, 64 wide, 2 bytes each
    assert m.kv_bytes_per_token(tp=2) == 2 * 10 * 4 * 64 * 2


def test_without_index_the_shard_files_are_weighed(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 8, "hidden_size": 512}))
    (tmp_path / "a.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "b.safetensors").write_bytes(b"x" * 24)
    m = load_model(str(tmp_path))
    assert m.total_bytes == 1024
    assert m.head_dim == 64 and m.num_kv_heads == 8


def test_text_config_of_multimodal_checkpoints_is_read(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3_5MoeForConditionalGeneration"],
                "text_config": {"num_hidden_layers": 5, "max_position_embeddings": 262144},
            }
        )
    )
    m = load_model(str(tmp_path))
    assert (m.num_layers, m.max_position) == (5, 262144)


def test_missing_path_is_model_not_found(tmp_path):
    with pytest.raises(ModelNotFound):
        load_model(str(tmp_path / "nope"))


def test_weights_split_over_tensor_and_pipeline_ranks(monkeypatch):
    assert gpu.weights_gib(120 * GIB, tp=2, pp=1) == 60
    assert gpu.weights_gib(120 * GIB, tp=2, pp=2) == 30
    monkeypatch.setenv("SPARKTUI_SIM_GPU_MEM_GIB", "80")
    monkeypatch.setenv("SPARKTUI_SIM_GPUS", "8")
    assert gpu.total_gib() == 80 and gpu.gpus_per_node() == 8
    assert "GPU 0 has a total capacity of 80.00 GiB" in gpu.torch_oom_message(2.0, 0.5, 79.0)
