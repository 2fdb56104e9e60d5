"""AutoModelForCausalLM's lookup as tensorrt_llm/_torch/models/modeling_auto.py does it: architectures[0] only,
as "EAGLE3" + the name (its "Eagle3" removed) for an Eagle3 draft checkpoint (one with draft_vocab_size)."""

from .modeling_utils import MODEL_CLASS_MAPPING


class AutoModelForCausalLM:
    @staticmethod
    def _resolve_class(config: dict):
        archs = config.get("architectures") or []
        if not archs:
            return None
        arch = archs[0]
        if "draft_vocab_size" in config:
            arch = "EAGLE3" + arch.replace("Eagle3", "")
        return MODEL_CLASS_MAPPING.get(arch)

    @staticmethod
    def from_config(config: dict):
        cls = AutoModelForCausalLM._resolve_class(config)
        if cls is None:
            first = (config.get("architectures") or [None])[0]
            raise ValueError(f"Unknown architecture for AutoModelForCausalLM: {first}")
        return cls
