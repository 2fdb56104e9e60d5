"""Registers Qwen3MoeForCausalLM, as tensorrt_llm/_torch/models/modeling_qwen3_moe.py does."""

from .modeling_utils import DecoderModelForCausalLM, register_auto_model


@register_auto_model("Qwen3MoeForCausalLM")
class Qwen3MoeForCausalLM(DecoderModelForCausalLM):
    pass
