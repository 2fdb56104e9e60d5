"""What the preflight runs on a node: the look before (interfaces, addresses, image, ports) and the
docker command, which must carry the plan's own container flags and env, quoted, without secrets."""

from __future__ import annotations

import json
import shlex

from sparktui.core.config.config import DockerConfig
from sparktui.core.state.journal import MASK
from sparktui.core.plan.plan import NodePlan
from sparktui.core.preflight.remote import (
    check_command,
    free_port,
    judge_look,
    look_command,
    parse_look,
    result_from_output,
    sweep_command,
)
from sparktui.core.preflight.check_program import MARK

IP_JSON = [
    {
        "ifname": "lo",
        "flags": ["LOOPBACK", "UP", "LOWER_UP"],
        "operstate": "UNKNOWN",
        "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}],
    },
    {
        "ifname": "enP7s7",
        "flags": ["BROADCAST", "UP", "LOWER_UP"],
        "operstate": "UP",
        "addr_info": [{"family": "inet", "local": "10.0.0.12", "prefixlen": 24}],
    },
    {
        "ifname": "enp1s0f1np1",
        "flags": ["BROADCAST", "UP", "NO-CARRIER"],
        "operstate": "DOWN",
        "addr_info": [{"family": "inet", "local": "192.168.100.11", "prefixlen": 24}],
    },
]
# /proc/net/tcp: 0x7531 = 30001 listening, 0x7532 = 30002 only established
PROC_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:7531 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 10 0 0 10 0
   1: 0B00000A:7532 0C00000A:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 10 0 0 10 0"""


def _look_text(image_ok: bool = True, ib: bool = False) -> str:
    image = "sha256:" + "ab" * 32 + "\n@@rc 0" if image_ok else "Error: No such image: img:1\n@@rc 1"
    return f"@@ip\n{json.dumps(IP_JSON)}\n@@image\n{image}\n@@ib\n{'yes' if ib else 'no'}\n@@tcp\n{PROC_TCP}\n"


def _node(**kw) -> NodePlan:
    base = dict(
        name="spark2",
        rank=1,
        role="worker",
        iface="enp1s0f1np1",
        ip="192.168.100.11",
        rdma="rocep1s0f1",
        container="c",
        env={"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "SGLANG_HOST_IP": "192.168.100.11"},
    )
    base.update(kw)
    return NodePlan(**base)


def test_look_command_quotes_the_image_and_the_format():
    cmd = look_command("repo/img:1; rm -rf /")
    assert shlex.quote("repo/img:1; rm -rf /") in cmd
    assert "--format '{{.Id}}'" in cmd


def test_parse_look_reads_interfaces_image_rdma_device_and_listening_ports():
    look = parse_look(_look_text(ib=True))
    assert set(look.interfaces) == {"lo", "enP7s7", "enp1s0f1np1"}
    assert look.interfaces["enP7s7"]["up"] and not look.interfaces["enp1s0f1np1"]["up"]
    assert "127.0.0.1" in look.addresses and "192.168.100.11" in look.addresses
    assert look.image_id.startswith("sha256:") and look.image_error is None
    assert look.infiniband is True
    assert look.listening == {30001}


def test_judge_look_passes_a_good_node_and_notes_a_link_without_carrier():
    kind, _, notes = judge_look(_node(), parse_look(_look_text()))
    assert kind is None
    assert any("enp1s0f1np1" in n and "carrier" in n for n in notes)


def test_judge_look_names_what_is_missing():
    look = parse_look(_look_text())
    kind, err, _ = judge_look(_node(iface="enp9s9"), look)
    assert kind == "interface_missing" and "enp9s9" in err and "enP7s7" in err
    kind, err, _ = judge_look(_node(env={"NCCL_SOCKET_IFNAME": "doesnotexist0"}), look)
    assert kind == "interface_missing" and "NCCL_SOCKET_IFNAME=doesnotexist0" in err
    kind, err, _ = judge_look(_node(ip="192.168.100.99"), look)
    assert kind == "address_missing" and "192.168.100.99" in err
    kind, err, _ = judge_look(_node(env={"SGLANG_HOST_IP": "10.9.9.9"}), look)
    assert kind == "address_missing" and "SGLANG_HOST_IP 10.9.9.9" in err
    kind, err, _ = judge_look(_node(), parse_look(_look_text(image_ok=False)))
    assert kind == "image_missing" and "No such image" in err


def test_free_port_skips_listening_and_plan_ports():
    assert free_port({29501, 29502}, 29500, {30000}) == 29503
    assert free_port(set(), 29500, {29501}) == 29502
    assert free_port(set(range(65000, 65536)), 64999, set()) is None


def test_check_command_uses_the_plan_flags_and_env_without_secrets():
    docker = DockerConfig(gpu_style="cdi", extra_args=["--privileged"], env={"HF_TOKEN": "x"})
    n = _node(env={"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "HF_TOKEN": MASK, "NCCL_DEBUG": "INFO"})
    cmd = check_command(
        docker,
        "lmsysorg/sglang:spark",
        n,
        True,
        check_id="abc123",
        addr="192.168.100.10",
        port=29501,
        world=2,
        timeout=30,
    )
    argv = shlex.split(cmd)
    assert argv[:6] == ["docker", "run", "--rm", "-i", "--name", "sparktui-preflight-abc123-r1"]
    assert "-d" not in argv  # the check runs attached and feeds the program on stdin
    for flag in (
        ["--network", "host"],
        ["--device", "nvidia.com/gpu=all"],
        ["--device", "/dev/infiniband"],
        ["--ulimit", "memlock=-1"],
        ["-e", "NCCL_SOCKET_IFNAME=enp1s0f1np1"],
        ["--privileged"],
    ):
        assert any(argv[i : i + len(flag)] == flag for i in range(len(argv))), flag
    assert not any("HF_TOKEN" in a for a in argv)
    tail = argv[argv.index("lmsysorg/sglang:spark") :]
    assert tail[:2] == ["python3", "-"] or tail[1:3] == ["python3", "-"]
    opts = dict(zip(tail[3::2], tail[4::2]))
    assert opts["--rank"] == "1" and opts["--world"] == "2" and opts["--addr"] == "192.168.100.10"
    assert opts["--port"] == "29501" and opts["--bind"] == "192.168.100.11" and opts["--iface"] == "enp1s0f1np1"
    assert not any(a.startswith("-v") for a in argv)  # the model and caches are not mounted for a network check


def test_sweep_and_result_parsing():
    assert sweep_command(["sparktui-preflight-a-r0"]).startswith("docker rm -f sparktui-preflight-a-r0")
    out = "noise\n" + MARK + json.dumps({"ok": False}) + "\n" + MARK + json.dumps({"ok": True, "rank": 1}) + "\n"
    assert result_from_output(out) == {"ok": True, "rank": 1}
    assert result_from_output("no result here") is None
    assert result_from_output(MARK + "{broken") is None
