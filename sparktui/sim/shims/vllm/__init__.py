"""Simulated vLLM (see sparktui/sim): `vllm serve` and `python3 -m vllm.entrypoints.openai.api_server`."""
__version__ = "0.11.0"
