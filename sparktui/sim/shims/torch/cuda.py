"""torch.cuda as a DGX Spark shows it: one GB10."""

from __future__ import annotations

import types

from sparktui.sim.nccl_lines import VERSION


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def set_device(_dev) -> None:
    pass


def get_device_name(_dev=None) -> str:
    return "NVIDIA GB10"


def synchronize(_dev=None) -> None:
    pass  # the stand-in's collectives return once done


nccl = types.SimpleNamespace(version=lambda: tuple(int(x) for x in VERSION.split(".")))
