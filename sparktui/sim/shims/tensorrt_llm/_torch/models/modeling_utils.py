"""The registry as tensorrt_llm/_torch/models/modeling_utils.py keeps it: architecture name -> model class."""

MODEL_CLASS_MAPPING = {}


def register_auto_model(name: str):
    def decorator(cls):
        MODEL_CLASS_MAPPING[name] = cls
        return cls

    return decorator


class DecoderModelForCausalLM:
    """Stands for the real base class: the simulator builds no model."""
