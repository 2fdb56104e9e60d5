"""Simulated: vLLM's own configs for model types transformers lacks; the simulator plays none."""

_CONFIG_REGISTRY = {}
