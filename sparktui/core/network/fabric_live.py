"""What NCCL says it uses, per rank, from the engines' own `NCCL INFO` lines, against what the plan listed.

NCCL prints at communicator init (NCCL_DEBUG=INFO, which every plan sets):
  `NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB primaryip:10.10.10.10<0>`  the HCAs in use
  `NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'`                                 GDR per HCA
  `NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 1 'roceP2p1s0f1`                    (on a Spark)
  `NET/Socket : Using [0]lo:127.0.0.1<0>`                                                 plain TCP
(NVIDIA/nccl#1537, NVIDIA/nccl-tests#185, mark-ramsey-ri/vllm-dgx-spark#1). Pure: lines in, facts and
flags out. The deployment feeds every container's log lines to a Live (one GPU per node, so one rank per
node) and shows each change as an `nccl_net` milestone: the launch pane's timeline and `--json` carry it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_IB_USING = re.compile(r"NET/IB\w* ?: Using ((?:\[\d+\][\w.-]+:\d+/\w+\s*)+)")
_HCA = re.compile(r"\[\d+\]([\w.-]+):\d+/(\w+)")
_GDR = re.compile(
    r"NET/IB\w* ?: GPU Direct RDMA (?:\(\w+\) )?(enabled|Enabled|Disabled|disabled) for HCA \d+ '([\w.-]+)"
)
# Ray's prefix on a remote worker's forwarded line: "(RayWorkerWrapper pid=N, ip=A)"
_RAY_IP = re.compile(r"\bip=([0-9A-Fa-f.:]+)\)")
_SOCKET = re.compile(r"NET/Socket ?: Using \[\d+\]([\w.-]+):")


@dataclass
class RankNet:
    """One rank's network as NCCL reported it."""

    net: str | None = None  # "ib" | "socket"; None until NCCL said
    hcas: list[str] = field(default_factory=list)  # RDMA devices NCCL uses, in its order
    gdr: dict[str, bool] = field(default_factory=dict)  # HCA -> GPU Direct RDMA on
    socket_ifs: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # the lines that said so

    def feed(self, line: str) -> bool:
        """Read one log line; True when it told something about the network."""
        m = _IB_USING.search(line)
        if m:
            self.net = "ib"
            self.hcas = list(dict.fromkeys(h for h, _ in _HCA.findall(m[1])))
        elif (g := _GDR.search(line)) is not None:
            self.gdr[g[2]] = g[1].lower() == "enabled"
        elif (s := _SOCKET.search(line)) is not None:
            if self.net != "ib":  # NCCL also lists sockets for bootstrap; IB, once said, is the data path
                self.net = "socket"
            self.socket_ifs.append(s[1])
        else:
            return False
        self.evidence.append(line.strip())
        return True


def flags(rank: str, seen: RankNet, planned: str | None, rdma_exists: bool) -> list[str]:
    """What is off on this rank: sockets where RDMA exists, or fewer halves than the plan listed."""
    want = [h for h in (planned or "").split(",") if h]
    out = []
    if seen.net == "socket" and (want or rdma_exists):
        out.append(
            f"{rank}: NCCL runs over TCP sockets ({', '.join(seen.socket_ifs) or '?'}) although the node has "
            f"RDMA ({', '.join(want) or 'an HCA'}): check /dev/infiniband and NCCL_IB_HCA"
        )
    elif seen.net == "ib" and want:
        missing = [h for h in want if h not in seen.hcas]
        if missing:
            out.append(
                f"{rank}: NCCL uses {', '.join(seen.hcas)} of the planned {', '.join(want)}: "
                f"{', '.join(missing)} idle (about half the link per idle half)"
            )
    off = [h for h, on in seen.gdr.items() if not on]
    if seen.net == "ib" and off:
        out.append(f"{rank}: GPU Direct RDMA is off for {', '.join(off)}: data goes through host memory")
    return out


def label(seen: RankNet) -> str | None:
    """ "NET/IB (rocep1s0f1, roceP2p1s0f1, GDR)" or "NET/Socket (eth0)"; None until NCCL said."""
    if seen.net == "ib":
        gdr = [seen.gdr.get(h) for h in seen.hcas]
        tail = ["GDR"] if gdr and all(gdr) else ["no GDR"] if any(g is False for g in gdr) else []
        return f"NET/IB ({', '.join(seen.hcas + tail)})"
    if seen.net == "socket":
        return f"NET/Socket ({', '.join(dict.fromkeys(seen.socket_ifs))})"
    return None


class Live:
    """Per node, what its rank's NCCL says, against the plan's NCCL_IB_HCA and whether the node has RDMA."""

    def __init__(
        self,
        planned: dict[str, str] | None = None,
        rdma: dict[str, bool] | None = None,
        ips: dict[str, str] | None = None,
    ) -> None:
        self.planned, self.rdma = dict(planned or {}), dict(rdma or {})
        self.ips = dict(ips or {})  # address -> node: with Ray, remote ranks' lines reach the head's log
        self.ranks: dict[str, RankNet] = {}
        self._shown: dict[str, tuple] = {}

    def feed(self, node: str, texts: list[str]) -> dict[str, dict]:
        """Read a batch of one container's lines; per node whose view changed, its new view."""
        fed = []
        for t in texts:
            if "NET/" in t and "NCCL" in t:  # cheap test first: this sees every line of a flood
                m = _RAY_IP.search(t) if "ip=" in t else None
                who = self.ips.get(m[1], node) if m else node
                if self.ranks.setdefault(who, RankNet()).feed(t) and who not in fed:
                    fed.append(who)
        out = {}
        for who in fed:
            view = self.view(who)
            key = (view["label"], tuple(view["flags"]))
            if view["label"] is not None and self._shown.get(who) != key:
                self._shown[who] = key
                out[who] = view
        return out

    def view(self, node: str) -> dict:
        r = self.ranks.get(node) or RankNet()
        return {
            "net": r.net,
            "hcas": list(r.hcas),
            "gdr": dict(r.gdr),
            "label": label(r),
            "planned": self.planned.get(node) or None,
            "flags": flags(node, r, self.planned.get(node), self.rdma.get(node, False)),
        }
