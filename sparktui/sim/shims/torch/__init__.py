"""A stand-in for the slice of torch that sparktui's rendezvous preflight uses (sparktui/core/preflight/check_program.py's
NCCL path), so the demo's check runs as on a Spark: one GB10, a NCCL process group over the node's fabric,
all-reduces that really sum across ranks and take the time the simulated fabric's bus bandwidth says
(sparktui.sim.timing.busbw_gbps: halves in NCCL_IB_HCA, MTU, sockets). No GPU and no NCCL are involved.
"""

from __future__ import annotations

from . import cuda, distributed  # noqa: F401 - torch.cuda and torch.distributed are attributes of torch

__version__ = "2.9.1+cu130"
float32 = "float32"


class device:  # noqa: N801 - torch's name
    def __init__(self, kind: str, index: int = 0):
        self.type, self.index = kind, index


class Tensor:
    """A tensor of n equal float32 values: all the preflight reads back is its first element."""

    def __init__(self, n: int, value: float):
        self.n, self.value = n, value

    def numel(self) -> int:
        return self.n

    def __getitem__(self, _):
        return Tensor(1, self.value)

    def item(self) -> float:
        return self.value


def ones(n: int, dtype=None, device=None) -> Tensor:
    return Tensor(int(n), 1.0)
