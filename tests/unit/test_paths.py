"""Bootstrap and data told apart: a management rendezvous with RDMA data is NVIDIA's own setup."""

from __future__ import annotations

from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.nodes.facts import Interface
from sparktui.core.network.network import subnets
from sparktui.core.network.paths import describe_paths, rendezvous_fix
from sparktui.core.plan.plan import PlanOptions, make_plan

from .test_fabric import spark_facts
from .test_plan import make_config

MGMT = "192.168.1.0/24"  # enP7s7 in the GB10 samples


def _sync_pair():
    """Two Sparks as NVIDIA Sync leaves them: both halves on their own subnet, dialled on enP7s7."""
    facts = [spark_facts(i) for i in range(2)]
    for f in facts:
        f.host = next(i for i in f.interfaces if i.name == "enP7s7").ipv4[0].split("/")[0]
    return {f.name: f for f in facts}


def _plan(facts, **opts):
    config = make_config(len(facts))
    for n in config.nodes:
        n.host = facts[n.name].host
    return make_plan(config, facts, subnets(list(facts.values())), PlanOptions(**opts))


def test_a_management_bootstrap_with_rdma_data_is_accepted_and_shown_as_such():
    plan = _plan(_sync_pair(), rendezvous=MGMT)
    assert not plan.errors, plan.errors
    assert plan.subnet == MGMT
    assert not any("NCCL would run over TCP" in w for w in plan.warnings), plan.warnings
    env = plan.nodes[1].env
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "enP7s7"
    assert env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1" and env["NCCL_IB_DISABLE"] == "0"
    assert any("bootstrap over the management port" in n and "NCCL_IB_HCA" in n for n in plan.notes), plan.notes
    paths = plan.fabric["paths"]
    assert paths["bootstrap"]["management"] and paths["bootstrap"]["nodes"]["spark2"]["iface"] == "enP7s7"
    assert paths["data"]["transport"] == "rdma" and paths["data"]["subnet"] == "192.168.100.0/24"
    assert describe_paths(paths, "spark2") == "bootstrap enP7s7 (management), data RDMA rocep1s0f1,roceP2p1s0f1"
    # the fabric is judged on the data path: both halves in use, none idle
    assert plan.fabric["halves_in_use"] == {"spark1": 2, "spark2": 2} and not plan.fabric["idle_half"]


def test_without_an_rdma_fabric_the_management_rendezvous_still_warns_of_tcp():
    facts = _sync_pair()
    for f in facts.values():
        for i in f.interfaces:
            i.rdma = None
    plan = _plan(facts, rendezvous=MGMT)
    assert any("NCCL would run over TCP" in w for w in plan.warnings), plan.warnings
    assert plan.fabric["paths"]["data"]["transport"] == "sockets"
    assert "data over sockets" in describe_paths(plan.fabric["paths"])


def test_the_fabric_rendezvous_bootstraps_and_carries_data_on_the_fabric():
    plan = _plan(_sync_pair())
    assert plan.subnet == "192.168.100.0/24" and not any("bootstrap over" in n for n in plan.notes)
    assert describe_paths(plan.fabric["paths"], "spark1") == (
        "bootstrap enp1s0f1np1, data RDMA rocep1s0f1,roceP2p1s0f1"
    )


def test_a_rendezvous_a_peer_cannot_use_is_refused_with_the_choices():
    facts = _sync_pair()
    plan = _plan(facts, rendezvous="172.17.0.0/16")  # docker0: every node has one, host-local
    assert plan.errors and "rendezvous 172.17.0.0/16" in plan.errors[0]
    assert "Choices:" in plan.errors[0] and "192.168.100.0/24" in plan.errors[0]
    # an interface only the head has (wlP9s9 is down and unaddressed): refused, not planned around
    plan = _plan(facts, rendezvous="wlP9s9")
    assert plan.errors and "Choices:" in plan.errors[0]


def test_plan_output_names_the_bootstrap_interface_and_the_data_hcas_per_node():
    from sparktui.cli.plan import render_plan
    from sparktui.cli.common import console

    with console.capture() as cap:
        console.print(render_plan(_plan(_sync_pair(), rendezvous=MGMT)))
    out = cap.get()
    assert "bootstrap enP7s7 (management), data RDMA rocep1s0f1,roceP2p1s0f1" in out
    assert "bootstrap enP7s7 192.168.1.102  data rocep1s0f1,roceP2p1s0f1" in out


def test_the_preflight_says_the_data_path_beside_a_management_bootstrap():
    from sparktui.core.preflight import NodeResult, Setting, Verdict

    plan = _plan(_sync_pair(), rendezvous=MGMT)
    s = Setting(addr=plan.head_ip, port=29500, subnet=plan.subnet, image="img", timeout=30, fabric=plan.fabric)
    nodes = {
        n.name: NodeResult.from_check(n.name, n.rank, n.iface, n.ip, {"ok": True, "path": "nccl", "transport": "rdma"})
        for n in plan.nodes
    }
    v = Verdict(setting=s, nodes=nodes, seconds=5.0)
    assert "  paths: bootstrap enP7s7 (management), data RDMA rocep1s0f1,roceP2p1s0f1" in v.summary()
    assert v.to_json()["paths"]["data"]["transport"] == "rdma"
    on_fabric = _plan(_sync_pair())
    s.fabric = on_fabric.fabric
    assert "paths:" not in v.summary()  # one subnet carries both: the node lines say it all


def _with_wlan(facts):
    """Both Sparks also on a Wi-Fi subnet: every node has an address there, nothing says it carries traffic."""
    for i, f in enumerate(facts.values()):
        f.interfaces.append(Interface("wlP9s9", [f"10.9.0.{11 + i}/24"], up=True, state=""))
    return facts


def test_a_rendezvous_on_a_third_network_gets_the_fabric_as_its_fix():
    plan = _plan(_with_wlan(_sync_pair()), rendezvous="wlP9s9")
    assert not plan.errors and plan.subnet == "10.9.0.0/24"
    fix = rendezvous_fix(plan.fabric["paths"])
    assert fix.startswith("the rendezvous sits on 10.9.0.0/24 (wlP9s9), not on the fabric 192.168.100.0/24")
    assert "relaunch with --iface 192.168.100.0/24" in fix and "preflight --iface 10.9.0.0/24" in fix


def test_the_fabric_or_the_management_port_as_rendezvous_needs_no_fix():
    facts = _with_wlan(_sync_pair())
    assert rendezvous_fix(_plan(facts).fabric["paths"]) == ""  # the fabric itself
    assert rendezvous_fix(_plan(facts, rendezvous=MGMT).fabric["paths"]) == ""  # NVIDIA's bootstrap
    assert rendezvous_fix(None) == "" and rendezvous_fix({}) == ""


def test_a_hang_on_that_rendezvous_names_the_fix_first_live_and_from_a_sign():
    fix = rendezvous_fix(_plan(_with_wlan(_sync_pair()), rendezvous="wlP9s9").fabric["paths"])
    clock = [0.0]
    d = Diagnoser("vllm", hang_after=30, clock=lambda: clock[0], hang_fix=fix)
    # rank 1's own lines in the real CPU build: it dials the head, then nothing
    d.feed(
        "(Worker pid=23) INFO 12-06 13:10:00 [parallel_state.py:1906] world_size=2 rank=1 local_rank=0 "
        "distributed_init_method=tcp://10.9.0.11:29500 backend=gloo",
        node="spark2",
    )
    clock[0] = 40.0
    d.tick()
    [hang] = [p for p in d.problems if p.kind == "rendezvous_hang"]
    assert hang.node == "spark2" and hang.hint.startswith(fix + ". If that subnet is meant:")
    d.feed(
        "[W1206 13:12:13.644088194 socket.cpp:938] [c10d] The server socket on [21f::]:13039 has timed out, "
        "will retry.",
        node="spark1",
    )
    [sign] = [p for p in d.problems if p.node == "spark1"]
    assert sign.kind == "rendezvous_hang" and sign.hint.startswith(fix)


def test_a_cpu_build_says_gloo_carries_the_data_where_it_bootstraps_and_keeps_the_fabric_fix():
    """vLLM's CPU build joins its ranks over gloo (`backend=gloo` in its own log): no NCCL, no HCA."""
    plan = _plan(_with_wlan(_sync_pair()), rendezvous=MGMT, engine="vllm", mode="native", engine_version="0.32.0+cpu")
    assert not any("NCCL_IB_HCA" in n or "data over RDMA" in n for n in plan.notes), plan.notes
    [note] = [n for n in plan.notes if n.startswith("collectives over gloo")]
    assert f"on the management port ({MGMT}" in note and "--iface 192.168.100.0/24" in note
    paths = plan.fabric["paths"]
    assert paths["data"] == {"transport": "gloo", "subnet": MGMT, "nodes": {"spark1": None, "spark2": None}}
    assert describe_paths(paths, "spark2") == "bootstrap enP7s7 (management), data over gloo there"
    # a rendezvous on a third network still gets the fabric as its fix
    wlan = _plan(_with_wlan(_sync_pair()), rendezvous="wlP9s9", engine="vllm", engine_version="0.32.0+cpu")
    assert rendezvous_fix(wlan.fabric["paths"]).startswith(
        "the rendezvous sits on 10.9.0.0/24 (wlP9s9), not on the fabric 192.168.100.0/24"
    )
    # the same release built for GPUs keeps its RDMA data path
    gpu = _plan(_sync_pair(), rendezvous=MGMT, engine="vllm", mode="native", engine_version="0.32.0")
    assert gpu.fabric["paths"]["data"]["transport"] == "rdma"
