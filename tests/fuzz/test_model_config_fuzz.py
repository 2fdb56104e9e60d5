"""The model's config.json as the node hands it over: damaged text, deep nesting, and a real config with any
field the planner reads swapped for any value. The reader gives a config the planner can use or one
ModelConfigError line naming the file; the plan from what it gave never raises, in bounded time."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.plan import modelconfig
from sparktui.core.plan.fit import replicated_params
from sparktui.core.plan.plan import PlanOptions, make_plan, model_dims

from ..unit.test_plan import cluster
from .strategies import bounded, deep_text, hostile_values, mutated

# Shaped like a multimodal MoE config (Qwen3.5-122B-A10B's): the text model inside text_config.
CONFIG = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "tie_word_embeddings": False,
    "text_config": {
        "hidden_size": 3072,
        "num_hidden_layers": 48,
        "vocab_size": 248320,
        "num_experts": 256,
        "shared_expert_intermediate_size": 1024,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "first_k_dense_replace": 0,
        "torch_dtype": "bfloat16",
    },
}
FIELDS = sorted(modelconfig.BOUNDS) + ["mlp_only_layers", "torch_dtype", "text_config"]
PLANNED = cluster(2)


def _used(cfg: dict) -> None:
    """What the planner does with a config the reader let through: none of it may raise."""
    replicated_params(cfg, "sglang", ["--enable-dp-attention"])
    model_dims(cfg)
    plan = make_plan(*PLANNED, PlanOptions(engine="sglang", model_config=cfg))
    assert isinstance(plan.warnings, list)


def _read(text: str) -> None:
    try:
        cfg = modelconfig.parse(text, "n1:/m/config.json")
    except modelconfig.ModelConfigError as e:
        assert str(e).startswith("could not read n1:/m/config.json: ") and "\n" not in str(e)
        return
    _used(cfg)


@bounded(150)
@given(mutated(json.dumps(CONFIG), edits=6) | deep_text())
def test_config_json_text_of_any_shape(text):
    _read(text)


@bounded(200)
@given(st.sampled_from(FIELDS), hostile_values(), st.booleans())
def test_any_field_of_any_value(name, value, nested):
    cfg = json.loads(json.dumps(CONFIG))
    (cfg["text_config"] if nested else cfg)[name] = value
    try:
        text = json.dumps(cfg)
    except (ValueError, RecursionError):  # NaN or deeper than json writes: not a file a node can hold
        return
    _read(text)
    _used(cfg)  # and the planner handed the dict without the reader: a warning, not a crash
