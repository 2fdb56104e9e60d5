"""What a simulated engine's NCCL would find on its fabric: the transport, how many HCAs (port halves) it
was told to use, and the MTU of their netdevs, learnt as NCCL learns them, from the environment and the node.

- NCCL_IB_DISABLE=1 forces sockets; otherwise NCCL_IB_HCA lists the HCAs (comma-separated, an optional
  leading `=` for exact names and `:port` suffixes; a leading `^` excludes instead), as NCCL's env docs
  describe (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-hca). Unset or an
  exclusion list: every active RDMA device of the node.
- The MTU is the netdev's (`/sys/class/infiniband/<hca>/device/net/<if>`, then `/sys/class/net/<if>/mtu`):
  RoCE's path MTU follows the Ethernet MTU of the interface. On a demo node both come from the node's
  stand-in sysfs under $SPARKTUI_DEMO_NODE, as the node's own kernel would show them.
Anything unreadable is None (unknown), never a guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class FabricPath:
    transport: str  # local, roce, socket
    halves: int  # HCAs NCCL spreads its channels over (1 when unknown)
    mtu: int | None  # the smallest MTU of their netdevs
    hcas: tuple[str, ...] = field(default=(), compare=False)  # their names, as NCCL lists them


def _roots(env) -> tuple[Path, Path]:
    node = env.get("SPARKTUI_DEMO_NODE")
    if node and Path(node, "sys-class-net").is_dir():
        return Path(node, "sys-class", "infiniband"), Path(node, "sys-class-net")
    return Path("/sys/class/infiniband"), Path("/sys/class/net")


def listed_hcas(env) -> list[str] | None:
    """The HCA names NCCL_IB_HCA selects; None when it selects by exclusion or is unset."""
    raw = str(env.get("NCCL_IB_HCA", "")).strip()
    if not raw or raw.startswith("^"):
        return None
    names = [e.strip().lstrip("=").split(":")[0] for e in raw.split(",")]
    return [n for n in names if n] or None


def _active(ib: Path) -> list[str]:
    try:
        devs = sorted(p.name for p in ib.iterdir())
    except OSError:
        return []
    out = []
    for d in devs:
        try:
            if "ACTIVE" in (ib / d / "ports" / "1" / "state").read_text():
                out.append(d)
        except OSError:
            continue
    return out


def _mtu(ib: Path, net: Path, hca: str) -> int | None:
    try:
        (netdev,) = [p.name for p in (ib / hca / "device" / "net").iterdir()]
        return int((net / netdev / "mtu").read_text().strip())
    except (OSError, ValueError):
        return None


def fabric_path(nnodes: int, env=None) -> FabricPath:
    env = os.environ if env is None else env
    if nnodes <= 1:
        return FabricPath("local", 0, None)
    if str(env.get("NCCL_IB_DISABLE", "")).strip() == "1":
        return FabricPath("socket", 0, None)
    ib, net = _roots(env)
    hcas = listed_hcas(env) or _active(ib)
    mtus = [m for m in (_mtu(ib, net, h) for h in hcas) if m]
    return FabricPath("roce", max(1, len(hcas)), min(mtus) if mtus else None, tuple(hcas))
