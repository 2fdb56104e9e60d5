"""Simulated vLLM quantization methods (sparktui/sim/support.py)."""

from sparktui.sim.support import QUANTIZATION

QUANTIZATION_METHODS = list(QUANTIZATION)
