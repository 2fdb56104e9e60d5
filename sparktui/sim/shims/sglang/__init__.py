"""Simulated SGLang (see sparktui/sim): only `python3 -m sglang.launch_server` is provided."""
__version__ = "0.5.4"
