"""Each RDMA half measured alone with ib_write_bw: a rail that trained at 200G and moves ~13 Gb/s is named."""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass

from sparktui.core.preflight.rails import client_command, measure, parse_gbps, server_command
from sparktui.core.preflight.verdict import Setting, Verdict

from .test_fabric import plan_of, spark_facts

# ib_write_bw's client report (perftest 24.x, --report_gbits, -D 3, eight QPs) at PR #108's numbers.
REPORT = """---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : {dev}
 Number of qps   : 8            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 Link type       : Ethernet
 GID index       : 3
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      {iters}           0.00               {gbps}                {rate}
---------------------------------------------------------------------------------------
"""


def _report(dev: str, gbps: float) -> str:
    return REPORT.format(dev=dev, gbps=f"{gbps:.2f}", iters=int(gbps * 1e9 * 3 / 8 / 65536), rate=f"{gbps / 524:.6f}")


@dataclass
class Ran:
    exit_status: int
    stdout: str
    stderr: str = ""


class Node:
    """A node that answers ib_write_bw's client with a recorded report per RDMA device."""

    def __init__(self, name: str, reports: dict[str, str], missing: bool = False):
        self.name, self.reports, self.missing, self.commands = name, reports, missing, []

    async def run(self, command: str, timeout: float | None = None) -> Ran:
        self.commands.append(command)
        if self.missing:
            return Ran(127, "ib_write_bw: command not found\n")
        dev = shlex.split(command.split("timeout", 2)[-1])[3]  # `... ib_write_bw -d DEV`
        return Ran(0, self.reports.get(dev, ""))


class Cluster:
    def __init__(self, *nodes: Node):
        self.nodes = {n.name: n for n in nodes}


def _rails():
    return plan_of([spark_facts(0), spark_facts(1)]).fabric["rails"]


def test_the_plan_lists_each_half_in_use_as_a_rail_with_its_share_of_the_speed():
    rails = _rails()
    assert [(r["subnet"], r["speed_mbps"]) for r in rails] == [
        ("192.168.100.0/24", 100000),
        ("192.168.101.0/24", 100000),
    ]
    assert [e["rdma"] for e in rails[1]["ends"]] == ["roceP2p1s0f1", "roceP2p1s0f1"]
    server, client = server_command(rails[0], 18515), client_command(rails[0], 18515)
    assert "ib_write_bw -d rocep1s0f1 -q 8 -D 3 --report_gbits -F -p 18515 -x 3" in server
    assert client.endswith("printf '%s\\n' \"$out\"") and " -x 3 192.168.100.10 2>&1)" in client


def test_parse_reads_the_average_not_the_peak():
    assert parse_gbps(_report("rocep1s0f1", 13.23)) == 13.23
    assert parse_gbps("Couldn't connect to 192.168.100.10:18515\n") is None


def test_a_half_that_trained_at_full_speed_but_moves_13_gb_s_is_named_by_interface_and_hca():
    spark2 = Node(
        "spark2", {"rocep1s0f1": _report("rocep1s0f1", 92.57), "roceP2p1s0f1": _report("roceP2p1s0f1", 13.23)}
    )
    results = asyncio.run(measure(Cluster(Node("spark1", {}), spark2), _rails()))
    assert [r.gbps for r in results] == [92.57, 13.23]
    assert results[0].problem() is None
    bad = results[1].problem()
    assert bad.startswith(
        "rail spark1 enP2p1s0f1np1 (roceP2p1s0f1) - spark2 enP2p1s0f1np1 (roceP2p1s0f1) on "
        "192.168.101.0/24 moves 13.2 Gb/s of its 100 Gb/s share (13 %)"
    )
    assert "PR #108" in bad
    v = Verdict(setting=Setting(addr="a", port=1, subnet=None, image="i", timeout=3), rails=results)
    assert f"  rail: {bad}" in v.summary()
    assert "the link spark1 - spark2 moves 105.8 Gb/s over 2 rail(s): under NVIDIA Sync's 184" in v.summary()
    j = v.to_json()
    assert j["rails"][1]["share"] == 0.132 and j["links_short"]
    # each rail on its own port: a late server of one never answers the next
    assert "-p 18515" in spark2.commands[0] and "-p 18516" in spark2.commands[1]


def test_healthy_rails_pass_and_a_missing_perftest_says_how_to_install_it():
    spark2 = Node(
        "spark2", {"rocep1s0f1": _report("rocep1s0f1", 92.57), "roceP2p1s0f1": _report("roceP2p1s0f1", 97.28)}
    )
    v = Verdict(
        setting=Setting(addr="a", port=1, subnet=None, image="i", timeout=3),
        rails=asyncio.run(measure(Cluster(Node("spark1", {}), spark2), _rails())),
    )
    assert v.to_json()["links_short"] == [] and "rail:" not in v.summary()
    assert "rails: 2 measured alone, the slowest spark1 enp1s0f1np1 (rocep1s0f1)" in v.summary()
    missing = asyncio.run(measure(Cluster(Node("spark1", {}), Node("spark2", {}, missing=True)), _rails()))
    assert missing[0].error == "ib_write_bw is not on spark2: `sudo apt install perftest` there"
