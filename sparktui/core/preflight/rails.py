"""Each rail of the fabric on its own: `ib_write_bw` between the two ends of every RDMA half in use.

A ConnectX-7 half can train at full speed and still move a fraction of it: NVIDIA/dgx-spark-playbooks PR #108
("Detect degraded ConnectX-7 initialization before cluster setup") saw Ethernet at 200 Gb/s and PCIe Gen5 x4
while TCP moved 12.86 Gb/s and an eight-QP `ib_write_bw` 13.23 Gb/s, where healthy halves move 92.57 and 97.28;
a link-speed check passes such a node, and NCCL's one number over all halves hides which one is slow. So each
rail is measured alone (eight QPs, a few seconds, as the PR does) and named with its interface and HCA when it
moves under half its share of the trained speed. NVIDIA Sync's Cluster Assistant passes a link (both halves of
one cable) at 184 Gb/s.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from dataclasses import dataclass

QPS = 8  # PR #108's eight-QP test
SECONDS = 3
BASE_PORT = 18515  # perftest's default port; one more per rail, so a rail's leftover server never answers the next
FRACTION = 0.5  # under this share of its trained speed a rail is flagged
DEGRADED = (8.0, 25.0)  # Gb/s: PR #108's characteristic range for the degraded start
LINK_PASS_GBPS = 184.0  # NVIDIA Sync's per-link pass (docs.nvidia.com/sync, connect-multiple-sparks)
_NUM = re.compile(r"^\s*\d+\s+\d+\s+[\d.]+\s+([\d.]+)\s")


def _end(rail: dict, k: int) -> dict:
    return rail["ends"][k]


def _words(end: dict, port: int) -> list[str]:
    w = ["ib_write_bw", "-d", end["rdma"], "-q", str(QPS), "-D", str(SECONDS), "--report_gbits", "-F", "-p", str(port)]
    if end.get("gid_index") is not None:
        w += ["-x", str(end["gid_index"])]  # RoCEv2's IPv4 GID; perftest's default may pick RoCEv1
    return w


def server_command(rail: dict, port: int) -> str:
    """The listening end, bounded: it exits after one test or when the client never comes."""
    return f"timeout {SECONDS + 15} " + " ".join(shlex.quote(x) for x in _words(_end(rail, 0), port)) + " 2>&1"


def client_command(rail: dict, port: int) -> str:
    """The sending end, retrying until the server listens (it starts at the same moment), bounded too."""
    words = " ".join(shlex.quote(x) for x in _words(_end(rail, 1), port) + [_end(rail, 0)["ip"]])
    return (
        f"command -v ib_write_bw >/dev/null || {{ echo 'ib_write_bw: command not found'; exit 127; }}; "
        f"end=$(( $(date +%s) + {SECONDS + 9} )); "
        f"while :; do out=$(timeout {SECONDS + 6} {words} 2>&1) && break; "
        f"[ $(date +%s) -lt $end ] || break; sleep 0.3; done; "
        f"printf '%s\\n' \"$out\""
    )


def parse_gbps(text: str) -> float | None:
    """BW average [Gb/sec] from ib_write_bw's result row (the row after the `#bytes` header)."""
    seen = False
    for line in text.splitlines():
        if "BW average" in line:
            seen = True
            continue
        m = _NUM.match(line) if seen else None
        if m:
            return float(m[1])
    return None


@dataclass
class RailResult:
    rail: dict
    gbps: float | None = None
    error: str | None = None

    def name(self) -> str:
        a, b = _end(self.rail, 0), _end(self.rail, 1)
        return f"{a['node']} {a['iface']} ({a['rdma']}) - {b['node']} {b['iface']} ({b['rdma']})"

    @property
    def share(self) -> float | None:
        speed = self.rail.get("speed_mbps")
        return self.gbps / (speed / 1000) if self.gbps is not None and speed else None

    def problem(self) -> str | None:
        """What is wrong with this rail, with what to do; None when it moves its share."""
        if self.gbps is None or self.share is None or self.share >= FRACTION:
            return None
        speed = self.rail["speed_mbps"] / 1000
        out = (
            f"rail {self.name()} on {self.rail['subnet']} moves {self.gbps:.1f} Gb/s of its {speed:.0f} Gb/s share "
            f"({self.share * 100:.0f} %)"
        )
        if DEGRADED[0] <= self.gbps <= DEGRADED[1]:
            out += (
                ": the link trained at full speed but the ConnectX-7 started degraded (NVIDIA/dgx-spark-playbooks "
                "PR #108: ~13 Gb/s at 200G); recover that node's ConnectX-7 as the PR documents, then check again"
            )
        else:
            out += ": check its cable and both ends' `ethtool` speed and PCIe link (`sudo lspci -vv`, LnkSta)"
        return out

    def to_json(self) -> dict:
        return {
            "rail": self.name(),
            "subnet": self.rail["subnet"],
            "speed_mbps": self.rail.get("speed_mbps"),
            "gbps": self.gbps,
            "share": round(self.share, 3) if self.share is not None else None,
            "error": self.error,
            "problem": self.problem(),
        }


def links_short(results: list[RailResult]) -> list[str]:
    """Cables (the rails between one pair of nodes) under NVIDIA Sync's 184 Gb/s, where they could carry it."""
    pairs: dict[tuple[str, str], list[RailResult]] = {}
    for r in results:
        pairs.setdefault((_end(r.rail, 0)["node"], _end(r.rail, 1)["node"]), []).append(r)
    out = []
    for (a, b), rs in pairs.items():
        if any(r.gbps is None for r in rs) or sum((r.rail.get("speed_mbps") or 0) for r in rs) < LINK_PASS_GBPS * 1000:
            continue
        total = sum(r.gbps or 0 for r in rs)
        if total < LINK_PASS_GBPS:
            out.append(
                f"the link {a} - {b} moves {total:.1f} Gb/s over {len(rs)} rail(s): under NVIDIA Sync's "
                f"{LINK_PASS_GBPS:.0f} Gb/s per-link pass"
            )
    return out


async def measure(cluster, rails: list[dict], timeout: float = SECONDS + 22) -> list[RailResult]:
    """Every rail in turn (rails of one port share its PCIe links: measured together they would split them)."""
    out = []
    for k, rail in enumerate(rails):
        a, b = cluster.nodes.get(_end(rail, 0)["node"]), cluster.nodes.get(_end(rail, 1)["node"])
        if a is None or b is None or not _end(rail, 0).get("rdma") or not _end(rail, 1).get("rdma"):
            continue
        port = BASE_PORT + k
        try:
            server, client = await asyncio.gather(
                a.run(server_command(rail, port), timeout=timeout), b.run(client_command(rail, port), timeout=timeout)
            )
        except Exception as e:  # noqa: BLE001 - one rail's surprise is that rail's result
            out.append(RailResult(rail, error=f"{type(e).__name__}: {e}"))
            continue
        text = "\n".join(x for x in (client.stdout, client.stderr) if x)
        gbps = parse_gbps(text)
        if gbps is not None:
            out.append(RailResult(rail, gbps))
        elif client.exit_status == 127 or "command not found" in text + server.stdout:
            node = _end(rail, 1 if client.exit_status == 127 else 0)["node"]
            out.append(RailResult(rail, error=f"ib_write_bw is not on {node}: `sudo apt install perftest` there"))
        else:
            out.append(RailResult(rail, error=(text.strip().splitlines() or ["no result"])[-1][:300]))
    return out
