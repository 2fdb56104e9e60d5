"""Registers Qwen3ForCausalLM, as tensorrt_llm/_torch/models/modeling_qwen3.py does."""

from .modeling_utils import DecoderModelForCausalLM, register_auto_model


@register_auto_model("Qwen3ForCausalLM")
class Qwen3ForCausalLM(DecoderModelForCausalLM):
    pass
