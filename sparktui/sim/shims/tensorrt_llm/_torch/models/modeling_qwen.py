"""Registers Qwen2ForCausalLM, as tensorrt_llm/_torch/models/modeling_qwen.py does."""

from .modeling_utils import DecoderModelForCausalLM, register_auto_model


@register_auto_model("Qwen2ForCausalLM")
class Qwen2ForCausalLM(DecoderModelForCausalLM):
    pass
