"""Simulated vLLM (see sparktui/sim): `vllm serve` and `python3 -m vllm.entrypoints.openai.api_server`."""

from sparktui.sim.vllm_args import VERSION as __version__  # noqa: F401 - the release the image plays
