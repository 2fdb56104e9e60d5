"""Registers LlamaForCausalLM, as tensorrt_llm/_torch/models/modeling_llama.py does."""

from .modeling_utils import DecoderModelForCausalLM, register_auto_model


@register_auto_model("LlamaForCausalLM")
class LlamaForCausalLM(DecoderModelForCausalLM):
    pass
