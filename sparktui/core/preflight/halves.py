"""Each fabric half's own subnet proven to carry traffic, not only the rendezvous one.

NVIDIA Sync puts the two halves of a CX-7 port on two subnets, and every HCA of both goes into
NCCL_IB_HCA; the rendezvous check only ever crosses one of them (or none, when the bootstrap is the
management port). A half whose cable, switch port or firewall drops its traffic then stalls NCCL after the
weights have loaded. So each rail of the plan (fabric.rails: one per half's subnet and pair of nodes) is
pinged from one end to the other out of that half's own interface: a few packets, a few seconds.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from dataclasses import dataclass

COUNT = 3
DEADLINE = 3  # seconds ping waits in all (-w): a half that drops everything costs no more
_RECEIVED = re.compile(r"(\d+)\s+(?:packets\s+)?received")
_REFUSED = re.compile(r"unreachable|Cannot assign requested address|No such device|unknown iface|bind", re.I)


def probe_command(iface: str, ip: str) -> str:
    """Ping ip out of iface only (-I), numeric, bounded; says when ping is missing rather than failing alike."""
    words = ["ping", "-n", "-q", "-c", str(COUNT), "-i", "0.2", "-w", str(DEADLINE), "-I", iface, ip]
    return (
        "command -v ping >/dev/null || { echo 'ping: command not found'; exit 127; }; "
        + " ".join(shlex.quote(w) for w in words)
        + " 2>&1"
    )


def received(text: str) -> int | None:
    m = _RECEIVED.search(text)
    return int(m[1]) if m else None


@dataclass
class HalfResult:
    """One rail's probe: from the second end's interface to the first end's address on that half's subnet."""

    rail: dict
    received: int | None = None
    error: str | None = None  # the probe could not tell (no ping, no SSH): not a failure of the half

    @property
    def ok(self) -> bool | None:
        return None if self.received is None else self.received > 0

    def name(self) -> str:
        a, b = self.rail["ends"]
        return f"{b['node']} {b['iface']} ({b['rdma']}) -> {a['node']} {a['iface']} {a['ip']}"

    def problem(self) -> str | None:
        """The half that carries no traffic, with what to check; None when it answered or could not be asked."""
        if self.ok is not False:
            return None
        a, b = self.rail["ends"]
        return (
            f"the fabric half {b['node']} {b['iface']} ({b['rdma']}) on {self.rail['subnet']} carries no traffic: "
            f"0 of {COUNT} pings reached {a['node']} {a['iface']} {a['ip']} out of it. NCCL_IB_HCA lists "
            f"{b['rdma']}, so NCCL would stall on it after the load. Fix: check that half's cable and "
            f"`ip link show {b['iface']}` on {b['node']} and `ip link show {a['iface']}` on {a['node']} (state UP, "
            f"an address on {self.rail['subnet']}), and any firewall rule on it (`sudo iptables -S`); "
            f"or leave it out with --iface on the other half's subnet until it is fixed"
        )

    def to_json(self) -> dict:
        return {
            "half": self.name(),
            "subnet": self.rail["subnet"],
            "received": self.received,
            "sent": COUNT,
            "ok": self.ok,
            "error": self.error,
            "problem": self.problem(),
        }


async def probe(cluster, rails: list[dict], timeout: float = DEADLINE + 12) -> list[HalfResult]:
    """Every rail at once (pings are a few packets: they do not compete as bandwidth tests would)."""

    async def one(rail: dict) -> HalfResult | None:
        a, b = rail["ends"]
        node = cluster.nodes.get(b["node"])
        if node is None or not b.get("iface") or not a.get("ip"):
            return None
        try:
            r = await node.run(probe_command(b["iface"], a["ip"]), timeout=timeout)
        except Exception as e:  # noqa: BLE001 - one node's surprise is that half's result, not the check's
            return HalfResult(rail, error=f"{type(e).__name__}: {e}")
        text = "\n".join(x for x in (r.stdout, r.stderr) if x)
        if r.exit_status == 127 or "command not found" in text:
            return HalfResult(rail, error=f"ping is not on {b['node']}: the half's subnet was not proven")
        got = received(text)
        last = (text.strip().splitlines() or ["no answer"])[-1][:200]
        if got is None and _REFUSED.search(text):  # the half cannot even send: no address, no such device
            return HalfResult(rail, received=0, error=last)
        return HalfResult(rail, received=got, error=None if got is not None else last)

    found = await asyncio.gather(*(one(r) for r in rails))
    return [r for r in found if r is not None]
