"""NCCL's INFO lines as a real rank prints them with NCCL_DEBUG=INFO, for the data path the simulator models.

Forms quoted from real logs (tests/unit/test_fabric_live.py cites each):
  host:pid:tid [dev] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB enp...:10.10.10.10<0>
  host:pid:tid [dev] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 1 'roceP2p1s0f1
  host:pid:tid [dev] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>
  host:pid:tid [dev] NCCL INFO Using network IB
  ... NCCL INFO Channel 09/0 : 1[0] -> 0[0] [send] via NET/IBext_v10/1   (mark-ramsey-ri/vllm-dgx-spark#1)
"""

from __future__ import annotations

import os
import socket
import threading

from .fabric_env import FabricPath

VERSION = "2.28.9"  # the release NVIDIA/dgx-spark-playbooks#102 measured at 23.74 GB/s busbw on two Sparks


def debug_on(env=None) -> bool:
    env = os.environ if env is None else env
    return str(env.get("NCCL_DEBUG", "")).strip().upper() in ("INFO", "TRACE")


def _prefix(device: int, host: str | None = None) -> str:
    host = host or os.environ.get("HOSTNAME") or socket.gethostname()
    return f"{host}:{os.getpid()}:{threading.get_native_id()} [{device}] NCCL INFO "


def init_lines(path: FabricPath, iface: str, ip: str, device: int = 0, host: str | None = None) -> list[str]:
    """What a rank prints while its communicator comes up: version, network, HCAs and GPU Direct RDMA."""
    p = _prefix(device, host)
    out = [f"{p}NCCL version {VERSION}+cuda13.0"]
    if path.transport == "socket" or not path.hcas:
        out += [f"{p}NET/Socket : Using [0]{iface}:{ip}<0>", f"{p}Using network Socket"]
        return out
    used = " ".join(f"[{i}]{h}:1/RoCE" for i, h in enumerate(path.hcas))
    out.append(f"{p}NET/IB : Using {used} [RO]; OOB {iface}:{ip}<0>")
    out += [f"{p}NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA {i} '{h}" for i, h in enumerate(path.hcas)]
    out.append(f"{p}Using network IB")
    return out


def channel_lines(path: FabricPath, rank: int, world: int, device: int = 0, host: str | None = None) -> list[str]:
    """One ring channel per HCA: this rank's send to the next, over the network path in use."""
    p = _prefix(device, host)
    nxt = (rank + 1) % world
    if path.transport == "socket" or not path.hcas:
        return [f"{p}Channel 00/0 : {rank}[{device}] -> {nxt}[0] [send] via NET/Socket/0"]
    return [
        f"{p}Channel {c:02d}/0 : {rank}[{device}] -> {nxt}[0] [send] via NET/IB/{c}/GDRDMA"
        for c in range(len(path.hcas))
    ]


def for_rank(rank: int, world: int, env=None, ip: str | None = None) -> list[str]:
    """What one rank spanning nodes prints with NCCL_DEBUG=INFO, from its environment and node; [] without it.
    `ip`: the rank's own address where it runs on another node than this process (a Ray worker)."""
    from . import netinfo
    from .fabric_env import fabric_path

    env = os.environ if env is None else env
    if not debug_on(env):
        return []
    path = fabric_path(2, env)
    iface = str(env.get("NCCL_SOCKET_IFNAME", "")).lstrip("=^").split(",")[0]
    if ip is None:
        try:
            ip = next((i.address for i in netinfo.interfaces() if i.name == iface), "")
        except (OSError, ValueError):
            ip = ""
    host = env.get("HOSTNAME") if env is not os.environ else None
    return init_lines(path, iface or "?", ip or "?", host=host) + channel_lines(path, rank, world, host=host)
