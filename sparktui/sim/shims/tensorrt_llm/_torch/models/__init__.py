"""Simulated tensorrt_llm._torch.models: importing it registers every model class (each module's
@register_auto_model), as the real package's __init__ does. A small list, not a release's whole registry."""

from . import modeling_llama, modeling_qwen, modeling_qwen3, modeling_qwen3_moe  # noqa: F401 - they register
from .modeling_auto import AutoModelForCausalLM  # noqa: F401
from .modeling_utils import MODEL_CLASS_MAPPING  # noqa: F401
