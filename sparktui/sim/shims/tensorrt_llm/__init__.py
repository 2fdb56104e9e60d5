"""Simulated TensorRT-LLM (see sparktui/sim): the release the image plays, and the PyTorch backend's model
registry and quantization reader in the shape the support check reads them (_torch/). The tools are the shims
in bin/ (trtllm-serve, trtllm-llmapi-launch, mpirun, sshd)."""

from sparktui.sim.trtllm_args import VERSION as __version__  # noqa: F401 - the release the image plays
