"""Per rank, what NCCL's own INFO lines say it uses, against the plan's NCCL_IB_HCA (real lines, cited)."""

from __future__ import annotations

from sparktui.core.network.fabric_live import RankNet, flags

# https://github.com/NVIDIA/nccl/issues/1537
IB_TWO = (
    "hostname1:25668:27396 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; "
    "OOB primaryip:10.10.10.10<0>"
)
GDR_OFF = "hostname1:25668:27396 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"
# https://github.com/NVIDIA/nccl-tests/issues/185
IB_H100 = (
    "dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; "
    "OOB enp220s0np0:11.1.128.136<0>"
)
# the message as REFERENCE.md quotes it from mark-ramsey-ri/vllm-dgx-spark#1 (two Sparks); the prefix is ours
GDR_SPARK = "spark2:312:401 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 1 'roceP2p1s0f1"
# the message as REFERENCE.md quotes it (torch 2.11 / NCCL 2.28.9 without RDMA); the prefix is ours
SOCKET = "h200:4242:4242 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>"


def _read(*lines: str) -> RankNet:
    r = RankNet()
    for ln in lines:
        r.feed(ln)
    return r


def test_hcas_and_gdr_per_hca_from_real_lines():
    r = _read(IB_TWO, GDR_OFF, "NCCL INFO Using network IB")
    assert r.net == "ib" and r.hcas == ["mlx5_0", "mlx5_1"] and r.gdr == {"mlx5_0": False}
    assert len(r.evidence) == 2
    assert _read(IB_H100).hcas == ["mlx5_10", "mlx5_11"]
    assert _read(GDR_SPARK).gdr == {"roceP2p1s0f1": True}


def test_fewer_halves_than_planned_and_sockets_beside_rdma_are_flagged():
    one = _read(IB_TWO.replace(" [1]mlx5_1:1/RoCE", ""))
    assert flags("rank 1", one, "mlx5_0,mlx5_1", True) == [
        "rank 1: NCCL uses mlx5_0 of the planned mlx5_0, mlx5_1: mlx5_1 idle (about half the link per idle half)"
    ]
    assert flags("rank 0", _read(IB_TWO), "mlx5_0,mlx5_1", True) == []
    sock = _read(SOCKET)
    assert sock.net == "socket" and "TCP sockets (lo)" in flags("rank 0", sock, "rocep1s0f1", True)[0]
    assert flags("rank 0", sock, None, False) == []  # no RDMA anywhere: sockets are all there is
    assert "GPU Direct RDMA is off for mlx5_0" in flags("rank 0", _read(IB_TWO, GDR_OFF), "mlx5_0,mlx5_1", True)[0]


def test_live_labels_each_node_and_flags_a_missing_half_once():
    from sparktui.core.network.fabric_live import Live

    live = Live(
        {"spark1": "rocep1s0f1,roceP2p1s0f1", "spark2": "rocep1s0f1,roceP2p1s0f1"}, {"spark1": True, "spark2": True}
    )
    spark = (
        "spark2:312:401 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; "
        "OOB enp1s0f1np1:192.168.100.11<0>"
    )
    assert live.feed("spark1", ["INFO loading weights", "NCCL INFO Using network IB"]) == {}  # nothing to show
    v = live.feed(
        "spark2", [spark, GDR_SPARK.replace("HCA 1", "HCA 0").replace("roceP2p1s0f1", "rocep1s0f1"), GDR_SPARK]
    )["spark2"]
    assert v["label"] == "NET/IB (rocep1s0f1, roceP2p1s0f1, GDR)" and v["flags"] == []
    one = spark.split(" [1]")[0] + " [RO]; OOB enp1s0f1np1:192.168.100.10<0>"
    v = live.feed("spark1", [one])["spark1"]
    assert v["label"] == "NET/IB (rocep1s0f1)" and "roceP2p1s0f1 idle" in v["flags"][0]
    assert live.feed("spark1", [one]) == {}  # the same view again is not news
    assert live.feed("spark1", [SOCKET.replace("h200", "spark1")]) == {}
    assert live.view("spark1")["label"] == "NET/IB (rocep1s0f1)"  # IB, once said, stays the data path


def test_with_ray_a_remote_ranks_lines_in_the_heads_log_count_for_its_node():
    from sparktui.core.network.fabric_live import Live

    live = Live({"spark1": "rocep1s0f1", "spark2": "rocep1s0f1"}, {}, {"192.168.100.11": "spark2"})
    # Ray's prefix for a worker's output (docs.ray.io "Logging": "(MyActor pid=..., ip=...)"), vLLM's tag before it
    line = "(EngineCore_DP0 pid=210) (RayWorkerWrapper pid=3301, ip=192.168.100.11) " + SOCKET
    views = live.feed("spark1", [line])
    assert list(views) == ["spark2"] and views["spark2"]["label"] == "NET/Socket (lo)"


def test_live_flags_sockets_where_the_node_has_rdma():
    from sparktui.core.network.fabric_live import Live

    v = Live({"n1": "mlx5_0"}, {"n1": True}).feed("n1", [SOCKET])["n1"]
    assert v["label"] == "NET/Socket (lo)" and "TCP sockets" in v["flags"][0]
    assert Live({}, {"n1": False}).feed("n1", [SOCKET])["n1"]["flags"] == []  # no RDMA to miss


def test_the_simulators_nccl_lines_read_as_real_ones(tmp_path):
    """The simulated engines and the demo's torch print what fabric_live and the preflight parse."""
    from sparktui.core.network.fabric_live import Live
    from sparktui.core.preflight.check_program import transport
    from sparktui.sim import nccl_lines
    from sparktui.sim.fabric_env import FabricPath

    path = FabricPath("roce", 2, 9000, ("rocep1s0f1", "roceP2p1s0f1"))
    lines = nccl_lines.init_lines(path, "enp1s0f1np1", "127.0.1.11") + nccl_lines.channel_lines(path, 0, 2)
    v = Live({"n": "rocep1s0f1,roceP2p1s0f1"}, {"n": True}).feed("n", lines)["n"]
    assert v["label"] == "NET/IB (rocep1s0f1, roceP2p1s0f1, GDR)" and v["flags"] == []
    assert transport(lines)["transport"] == "rdma"
    sock = FabricPath("socket", 0, None)
    lines = nccl_lines.init_lines(sock, "enp1s0f1np1", "127.0.1.11") + nccl_lines.channel_lines(sock, 0, 2)
    assert Live({}, {"n": True}).feed("n", lines)["n"]["label"] == "NET/Socket (enp1s0f1np1)"
    assert transport(lines)["transport"] == "socket"
