"""Simulated SGLang (see sparktui/sim): only `python3 -m sglang.launch_server` is provided."""
from sparktui.sim.sglang_args import VERSION as __version__  # noqa: F401 - the release the image plays
