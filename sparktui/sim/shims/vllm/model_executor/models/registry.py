"""Simulated vLLM model registry: the architectures the played release lists (sparktui/sim/support.py)."""

from sparktui.sim.support import archs


class _ModelRegistry:
    def get_supported_archs(self):
        return archs("vllm")


ModelRegistry = _ModelRegistry()
