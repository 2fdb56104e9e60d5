"""Simulated SGLang (see sparktui/sim): `python3 -m sglang.launch_server` and `sglang serve`."""

from sparktui.sim.sglang_args import VERSION as __version__  # noqa: F401 - the release the image plays
