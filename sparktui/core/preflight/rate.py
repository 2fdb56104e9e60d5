"""The measured bandwidth against what the link could carry, and why it falls short.

The line rate comes from the plan (fabric.summary: each half in use contributes its share of the port's
speed); the likely causes are named in the order they cost the most: sockets instead of RDMA, one half
of the port, a small MTU, then the NCCL build.
"""

from __future__ import annotations

import re

from ..network.ring import TOPOLOGY_WORDS

SHORT = 0.6  # below this share of the line rate the verdict names a likely cause
# NCCL releases with known multi-node trouble on Sparks, each with its source.
NCCL_KNOWN = {
    "2.30.4": "NCCL 2.30.4 hangs MoE weight loading on 8 Sparks (NVIDIA/nccl#2167)",
}
# NVIDIA/dgx-spark-playbooks#102 and PR #103: a development build of NCCL 2.28.9 plateaued at 3.04 GB/s
# busbw where a release build of the same version reached 23.74 GB/s on the same two Sparks.
DEV_BUILD = (
    "a development NCCL build plateaued at 3.04 GB/s where a release build reached 23.74 GB/s "
    "(NVIDIA/dgx-spark-playbooks#102): use the image's own NCCL, or a release build"
)


# NVIDIA's pass lines for all_gather_perf -b 16G -e 16G bus bandwidth (dgx-spark-playbooks
# multi-sparks-through-switch/assets/spark_cluster_setup/spark_cluster_setup.py: MIN_NCCL_TEST_BW = 21.875
# "175 Gbps", MIN_NCCL_TEST_BW_RING = 10 "80 Gbps"), by fabric.topology.
PASS_LINES = {"back-to-back": 21.875, "switch": 21.875, "ring": 10.0}
PASS_SOURCE = "NVIDIA's all_gather_perf -b 16G pass line (spark_cluster_setup.py)"


def pass_line(fabric: dict) -> float | None:
    """NVIDIA's pass line for the plan's topology; None off RDMA (NVIDIA measures over the HCAs only)."""
    if not fabric or not fabric.get("rdma"):
        return None
    return PASS_LINES.get(fabric.get("topology") or "")


def pass_words(bw: float, fabric: dict) -> str | None:
    """ "below NVIDIA's ... pass line for a ring (10.00 GB/s)" or "meets ..."; None without a line."""
    line = pass_line(fabric)
    if line is None:
        return None
    topo = TOPOLOGY_WORDS.get(fabric.get("topology") or "", fabric.get("topology"))
    verdict = "below" if bw < line else "meets"
    # The check measures an all-reduce on a smaller buffer: close to, not the same as, NVIDIA's all-gather.
    return f"{verdict} {PASS_SOURCE} for a {topo} fabric ({line:.2f} GB/s busbw)"


def line_rate_gb_s(fabric: dict) -> float | None:
    mbps = fabric.get("line_rate_mbps") if fabric else None
    return mbps / 8000 if isinstance(mbps, (int, float)) and mbps > 0 else None


def share(bandwidth_gb_s: float | None, fabric: dict) -> float | None:
    rate = line_rate_gb_s(fabric)
    return bandwidth_gb_s / rate if rate and bandwidth_gb_s is not None else None


def nccl_flag(version: str | None) -> str | None:
    """A known problem of this NCCL release, cited; None when none is known."""
    if not version:
        return None
    m = re.match(r"(\d+\.\d+\.\d+)", version)
    return NCCL_KNOWN.get(m[1]) if m else None


def causes(transport: str | None, fabric: dict, nccl: str | None) -> list[str]:
    """Why a bandwidth falls short of the line rate, most likely first, each with its fix."""
    out = []
    low = sorted(f"{n} {m}" for n, m in (fabric.get("mtu") or {}).items() if m and m < 9000)
    mtu = f"MTU {', '.join(low)}: `sudo ip link set IF mtu 9000` on every node"
    if transport == "tcp":  # the check's own TCP stream (no torch with a GPU): neither NCCL nor RDMA took part
        return [
            "a plain TCP stream measured it (the image has no torch with a GPU): one connection over one "
            "interface, without RDMA, so it tells reachability more than the link's rate"
        ] + ([mtu] if low else [])
    if transport == "socket" and fabric.get("rdma"):
        out.append(
            "NCCL ran over TCP sockets although the fabric has RDMA: check /dev/infiniband on every node "
            "and NCCL_IB_HCA (the plan's env)"
        )
    halves, of = fabric.get("halves_in_use") or {}, fabric.get("port_halves") or {}
    one = sorted(n for n, k in halves.items() if k < (of.get(n) or k))
    if one:
        out.append(
            f"one half of the port in use on {', '.join(one)}: bring the other half up on its own subnet "
            "(the plan's warning names the commands)"
        )
    if low and fabric.get("rdma"):
        out.append(mtu)
    flag = nccl_flag(nccl)
    out.append(flag if flag else f"the NCCL build{f' ({nccl})' if nccl else ''}: {DEV_BUILD}")
    if fabric.get("nccl_scope"):  # another collective takes decode's all-reduces: say what the shortfall costs
        out.append(f"what this costs: {fabric['nccl_scope']}")
    return out


def scope(fabric: dict) -> str | None:
    """What the measured NCCL bandwidth bounds in this deployment, when not every all-reduce; None otherwise."""
    return fabric.get("nccl_scope") if fabric else None
