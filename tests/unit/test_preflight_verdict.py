"""The preflight's judgement: error kinds from NCCL/torch/docker text, the transport from NCCL_DEBUG
lines, per-node results from the check's JSON, the root cause and fix of a verdict."""

from __future__ import annotations

import pytest

from sparktui.core.preflight import NodeResult, Setting, Verdict, explain
from sparktui.core.preflight.check_program import classify, iface_matches, transport
from sparktui.core.preflight.verdict import judge_late_peers

# Lines as printed by torch 2.11 / NCCL 2.28.9 on two H200s (see REFERENCE.md) and by docker.
NO_IFACE = (
    "h200:4242:4242 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to doesnotexist0\n"
    "h200:4242:4242 [0] misc/socket.cc:474 NCCL WARN Bootstrap : no socket interface found\n"
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2000, internal error"
)
PEER_GONE = "[rank0]: torch.distributed.DistStoreError: store->get('0') got error: Failed to recv, got 0 bytes."
STORE_WAIT = "torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients. 1/2 clients joined."
CLIENT_WAIT = (
    "torch.distributed.DistNetworkError: The client socket has timed out after 30000ms while trying "
    "to connect to (10.0.100.1, 29501)."
)
NON_SOCKET = "NCCL WARN socketPollConnect: Connect to 192.168.100.10<45231> failed : Socket operation on non-socket"
GPU_DRIVER = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
NO_PY = (
    'docker: Error response from daemon: failed to create task: exec: "python3": executable file not '
    "found in $PATH: unknown."
)
NO_IMAGE = "Unable to find image 'lmsysorg/sglang:spark' locally"
RDMA_WARN = "spark1:99:120 [0] transport/net_ib.cc:1200 NCCL WARN NET/IB : Got completion from peer with error 12"


@pytest.mark.parametrize(
    "text, kind, says",
    [
        (NO_IFACE, "interface_missing", "no socket interface found"),
        (NON_SOCKET, "interface_missing", "Socket operation on non-socket"),
        (PEER_GONE, "peer_failed", "Failed to recv"),
        (STORE_WAIT, "peer_missing", "1/2 clients joined"),
        (CLIENT_WAIT, "unreachable", "(10.0.100.1, 29501)"),
        (GPU_DRIVER, "docker", "could not select device driver"),
        (NO_PY, "python_missing", "executable file not found"),
        (NO_IMAGE, "image_missing", "lmsysorg/sglang:spark"),
        (RDMA_WARN, "rdma", "Got completion from peer"),
        ("could not reach 10.0.100.1:29501 from 10.0.100.2 (no route to host)", "unreachable", "no route to host"),
        (
            "nothing listens at 10.0.100.9:29501: connection refused from 10.0.100.2 until the deadline",
            "refused",
            "10.0.100.9:29501",
        ),
        ("no answer within 30 s: hung in all-reduce", "timeout", "hung in all-reduce"),
    ],
)
def test_classify_names_the_kind_and_quotes_the_line(text, kind, says):
    got_kind, line = classify(text)
    assert got_kind == kind
    assert says in line
    assert "\n" not in line


def test_a_root_cause_wins_over_what_the_other_lines_say():
    # The rank that lacks the interface also prints the NCCL error and a lost peer: the interface is the cause.
    assert classify(PEER_GONE + "\n" + NO_IFACE)[0] == "interface_missing"
    # The client's timeout names the address; the store's count is what rank 0 sees of the same failure.
    assert classify(STORE_WAIT + "\n" + CLIENT_WAIT)[0] == "unreachable"


def test_classify_returns_nothing_for_plain_output():
    assert classify("all good\nNCCL INFO Init COMPLETE") == (None, None)
    assert classify("") == (None, None)


def test_transport_from_socket_lines_without_rdma():
    lines = [
        "h:1:1 [0] NCCL INFO NET/IB : No device found.",
        "h:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0",
    ]
    t = transport(lines)
    assert (t["transport"], t["net"]) == ("socket", "socket")
    assert "lo:127.0.0.1" in t["net_line"]
    assert "via NET/Socket" in t["line"]


def test_an_ib_using_line_without_a_device_is_not_rdma():
    # NCCL 2.28.9 on H200s with no RDMA device prints an IB "Using" line with no device in it.
    lines = [
        "vm:661:661 [0] NCCL INFO NET/IB : No device found.",
        "vm:661:661 [0] NCCL INFO NET/IB : Using [RO]; OOB lo:127.0.0.1<0>",
        "vm:661:661 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>",
        "vm:661:661 [0] NCCL INFO Using network Socket",
        "vm:661:661 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
    ]
    t = transport(lines)
    assert (t["transport"], t["net"]) == ("p2p", "socket")
    assert t["net_line"].endswith("NET/Socket : Using [0]lo:127.0.0.1<0>")


def test_the_missing_interface_error_of_nccl_2_28():
    text = (
        "DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, invalid usage "
        "(run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9\n"
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
        "Bootstrap : no socket interface found"
    )
    assert classify(text) == ("interface_missing", "Bootstrap : no socket interface found")


def test_transport_rdma_from_the_using_line_and_from_gdrdma_channels():
    assert (
        transport(["NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.10<0>"])[
            "transport"
        ]
        == "rdma"
    )
    t = transport(
        [
            "NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE",
            "NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
        ]
    )
    assert (t["transport"], t["net"]) == ("rdma", "rdma")


def test_transport_on_one_host_is_p2p_and_sockets_win_when_mixed():
    p2p = [
        "NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>",
        "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    ]
    t = transport(p2p)
    assert (t["transport"], t["net"]) == ("p2p", "socket")
    assert transport(p2p + ["NCCL INFO Channel 01/0 : 0[0] -> 1[1] via NET/Socket/1"])["transport"] == "socket"
    assert transport(["nothing"])["transport"] is None


@pytest.mark.parametrize(
    "spec, names, hits",
    [
        ("enp1s0f1np1", ["lo", "enp1s0f1np1", "enP2p1s0f1np1"], ["enp1s0f1np1"]),
        ("enp", ["lo", "enp1s0f1np1", "enP7s7"], ["enp1s0f1np1"]),  # a prefix, as NCCL reads it
        ("=enp", ["enp1s0f1np1"], []),  # '=' means the exact name
        ("^lo,docker", ["lo", "docker0", "eth0"], ["eth0"]),
        ("doesnotexist0", ["lo", "eth0"], []),
        ("eth0:1234,wlan", ["eth0", "wlan0"], ["eth0", "wlan0"]),
    ],
)
def test_iface_matches_reads_nccl_socket_ifname(spec, names, hits):
    assert iface_matches(spec, names) == hits


def _setting(**kw) -> Setting:
    base = dict(
        addr="10.0.100.1",
        port=29501,
        subnet="10.0.100.0/24",
        image="img:1",
        timeout=30.0,
        head="node1",
        alternatives=["10.0.0.0/24"],
        ranks={0: "node1", 1: "node2"},
    )
    base.update(kw)
    return Setting(**base)


def test_from_check_keeps_an_ok_result_and_reclassifies_an_unknown_failure():
    ok = NodeResult.from_check(
        "node1",
        0,
        "lo",
        "127.0.0.1",
        {
            "ok": True,
            "path": "nccl",
            "transport": "p2p",
            "net": "socket",
            "bandwidth_gb_s": 123.4,
            "transport_line": "via P2P/CUMEM",
            "nccl_lines": ["a", "b"],
            "timings": {"import": 2.5},
            "kind": "x",
        },
    )
    assert ok.ok and ok.kind is None and ok.bandwidth_gb_s == 123.4 and ok.nccl_lines == ["a", "b"]
    bad = NodeResult.from_check(
        "node2",
        1,
        "enp1",
        "10.0.100.2",
        {"ok": False, "error": "DistBackendError: NCCL error", "tail": NO_IFACE.splitlines(), "stage": "rendezvous"},
    )
    assert (bad.kind, bad.stage) == ("interface_missing", "rendezvous")
    assert "no socket interface found" in bad.line


def test_the_verdict_names_the_unreachable_address_not_the_waiting_head():
    s = _setting()
    head = NodeResult.from_check(
        "node1",
        0,
        "enp1s0f1np1",
        "10.0.100.1",
        {
            "ok": False,
            "kind": "peer_missing",
            "error": "waited 30 s at 10.0.100.1:29501: 1/2 ranks joined (missing ranks: 1)",
        },
    )
    worker = NodeResult.from_check("node2", 1, "enP2p1s0f1np1", "10.0.100.2", {"ok": False, "error": CLIENT_WAIT})
    v = Verdict(setting=s, nodes={"node1": head, "node2": worker}, seconds=31.0)
    for r in v.nodes.values():
        r.reason, r.fix = explain(r, s)
    assert not v.ok
    assert v.root is worker
    assert "10.0.100.1:29501 is unreachable from node2" in v.reason
    assert "--iface 10.0.0.0/24" in v.fix and "enP2p1s0f1np1" in v.fix
    j = v.to_json()
    assert j["failed"] == ["node1", "node2"] and j["reason"] == v.reason
    assert [n["node"] for n in j["nodes"]] == ["node1", "node2"]
    text = v.summary()
    assert text.startswith("preflight FAILED") and "node2 (rank 1" in text and "try:" in text


@pytest.mark.parametrize(
    "kind, error, reason_has, fix_has",
    [
        ("interface_missing", "no interface named enp9s9 on node2 (it has lo, eth0)", "enp9s9", "--iface 10.0.0.0/24"),
        (
            "address_missing",
            "SGLANG_HOST_IP 10.0.0.99 is not an address of this node (node2)",
            "SGLANG_HOST_IP",
            "SGLANG_HOST_IP must be node2's own address on 10.0.100.0/24 (10.0.100.2)",
        ),
        ("rdma", RDMA_WARN, "RDMA", "NCCL_IB_HCA=rocep1s0f1"),
        ("image_missing", "Error: No such image: img:1", "img:1", "sparktui sync image"),
        ("docker", GPU_DRIVER, "could not select device driver", "gpu_style"),
    ],
)
def test_explain_gives_the_fix_to_try(kind, error, reason_has, fix_has):
    r = NodeResult.failed("node2", 1, "enP2p1s0f1np1", "10.0.100.2", kind, error)
    reason, fix = explain(r, _setting(), rdma="rocep1s0f1")
    assert reason_has in reason
    assert fix_has in fix


def test_a_hang_in_the_all_reduce_points_at_rdma_and_one_in_the_rendezvous_at_the_subnet():
    s = _setting()
    r = NodeResult.failed("node2", 1, "enp1", "10.0.100.2", "timeout", "no answer within 30 s: hung in all-reduce")
    r.stage = "all-reduce"
    assert "NCCL_IB_DISABLE=1" in explain(r, s, rdma="rocep1s0f1")[1]
    r.stage = "rendezvous"
    assert "--iface 10.0.0.0/24" in explain(r, s)[1]


def test_an_ok_verdict_reports_the_slowest_transport_and_bandwidth():
    s = _setting()
    a = NodeResult(
        node="node1", rank=0, ok=True, transport="rdma", bandwidth_gb_s=20.0, bandwidth_what="all-reduce bus bandwidth"
    )
    b = NodeResult(
        node="node2", rank=1, ok=True, transport="socket", bandwidth_gb_s=1.1, bandwidth_what="all-reduce bus bandwidth"
    )
    v = Verdict(setting=s, nodes={"node1": a, "node2": b}, seconds=8.2)
    assert v.ok and v.reason is None and v.fix is None
    assert (v.transport, v.bandwidth_gb_s) == ("socket", 1.1)
    assert v.summary().splitlines()[0] == (
        "preflight ok in 8.2 s: 2 node(s) met at 10.0.100.1:29501 over socket, all-reduce bus bandwidth 1.10 GB/s"
    )
    assert Verdict(setting=s).ok is False  # no node checked is no verdict of health


def _failed(node: str, rank: int, kind: str, error: str = "") -> NodeResult:
    return NodeResult(node=node, rank=rank, ok=False, kind=kind, error=error or kind)


def test_a_container_that_never_started_is_named_with_a_docker_fix_and_no_subnet():
    s = _setting(start_window=240.0)
    slow = _failed("node2", 1, "not_started", "the container did not start within 240 s")
    slow.tail = ["Loaded image: img:1"]
    slow.reason, slow.fix = explain(slow, s)
    v = Verdict(setting=s, nodes={"node1": _failed("node1", 0, "stopped"), "node2": slow})
    assert v.root is slow
    assert v.reason.startswith("the container did not start within 240 s on node2")
    assert "Loaded image: img:1" in v.reason
    assert "docker run --rm img:1 true" in v.fix and "docker info" in v.fix and "--start-window" in v.fix
    assert "--iface" not in v.fix and "subnet" not in v.fix


def test_a_rendezvous_that_waited_for_a_container_still_starting_blames_the_start():
    head = _failed("node1", 0, "peer_missing", STORE_WAIT)
    results = {"node1": head, "node2": _failed("node2", 1, "not_started")}
    judge_late_peers(results, {"node1": (0.0, 31.0)})
    assert head.kind == "peer_late" and "node2's container never started" in head.error
    s = _setting()
    for r in results.values():
        r.reason, r.fix = explain(r, s)
    assert Verdict(setting=s, nodes=results).root.node == "node2"


def test_ranks_whose_checks_never_overlapped_are_late_peers_not_network_failures():
    # node1's program ran 0..31 s (gave up waiting), node2's started at 60 s and found nobody listening
    head = _failed("node1", 0, "timeout", "no answer within 30 s: hung in rendezvous")
    worker = _failed("node2", 1, "refused", "nothing listens at 10.0.100.1:29501")
    results = {"node1": head, "node2": worker}
    judge_late_peers(results, {"node1": (0.0, 31.0), "node2": (60.0, 91.0)})
    assert head.kind == worker.kind == "peer_late"
    assert "node2's container started 60 s after node1's" in head.error
    assert "node2's container started 60 s after node1's, when that check was over" in worker.error
    s = _setting()
    worker.reason, worker.fix = explain(worker, s)
    assert "--iface" not in worker.fix and "--timeout" in worker.fix


def test_ranks_that_overlapped_keep_their_rendezvous_verdict():
    head = _failed("node1", 0, "timeout", "no answer within 30 s")
    worker = _failed("node2", 1, "unreachable", "No route to host")
    results = {"node1": head, "node2": worker}
    judge_late_peers(results, {"node1": (0.0, 31.0), "node2": (5.0, 36.0)})
    assert (head.kind, worker.kind) == ("timeout", "unreachable")
    s = _setting()
    head.reason, head.fix = explain(head, s)
    assert head.reason == "node1 got no answer within 30 s" and "--iface 10.0.0.0/24" in head.fix
