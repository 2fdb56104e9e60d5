"""Simulated SGLang quantization methods (sparktui/sim/support.py)."""

from sparktui.sim.support import QUANTIZATION

QUANTIZATION_METHODS = {name: None for name in QUANTIZATION}
