"""Both halves of a Spark's port, the MTU, the topology: probe facts from real GB10 output, then the plan."""

from __future__ import annotations

import json
from pathlib import Path

from sparktui.core.nodes.facts import Interface, NodeFacts
from sparktui.core.network.fabric import line_rate_mbps, in_use, ports, topology, topology_env
from sparktui.core.network.network import subnets
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.nodes.probes import parse_ib_gid, parse_ibdev2netdev, parse_ip_addr, parse_probe, parse_speeds

from .test_plan import make_config, make_facts, node_name

SAMPLES = Path(__file__).parent / "samples" / "probes"


def _sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def _section(name: str, out: str, rc: int = 0, err: str = "") -> str:
    return f"@@sparktui:out {name}@@\n{out}\n@@sparktui:err {name}@@\n{err}\n@@sparktui:rc {name} {rc}@@\n"


def _ip_json(sample: str, *, twin_down: bool = False, mtu: int | None = None, mtus: dict | None = None) -> str:
    """A Spark's real `ip -j addr`, edited the way a fresh Spark or a half-done fix leaves it."""
    links = json.loads(_sample(sample))
    for link in links:
        if twin_down and link["ifname"] == "enP2p1s0f1np1":
            link["flags"] = ["BROADCAST", "MULTICAST"]
            link["operstate"] = "DOWN"
            link["addr_info"] = [a for a in link["addr_info"] if a["family"] != "inet"]
        if link["ifname"].startswith(("enp1s0f1", "enP2p1s0f1")):
            if mtu is not None:
                link["mtu"] = mtu
            if mtus and link["ifname"] in mtus:
                link["mtu"] = mtus[link["ifname"]]
    return json.dumps(links)


def spark_facts(i: int, **edits) -> NodeFacts:
    """Node i with a GB10's interfaces from the probe's own parsers (real output, edited)."""
    f = make_facts(i)
    f.interfaces = parse_ip_addr(_ip_json(f"ip-addr-spark{i + 1}.json", **edits))
    rdma = parse_ibdev2netdev(_sample("ibdev2netdev-spark.txt"))
    speed = parse_speeds(_sample("speed-spark.txt"))
    pci, gids = parse_ib_gid(_sample("ib-gid-spark.txt"))
    for iface in f.interfaces:
        iface.rdma, iface.speed_mbps = rdma.get(iface.name), speed.get(iface.name)
        if iface.rdma:
            iface.pci, iface.gid_index = pci.get(iface.rdma), gids.get(iface.rdma)
    return f


def plan_of(facts: list[NodeFacts], **opts):
    by = {f.name: f for f in facts}
    return make_plan(make_config(len(facts)), by, subnets(facts), PlanOptions(**opts))


def _has(msgs, *words) -> bool:
    return any(all(w in m for w in words) for m in msgs)


# --- the probe ------------------------------------------------------------------------------------


def test_gid_index_is_the_rocev2_ipv4_entry_and_pci_pairs_the_halves():
    pci, gids = parse_ib_gid(_sample("ib-gid-spark.txt"))
    assert gids == {"rocep1s0f1": 3, "roceP2p1s0f1": 3}  # indexes 0-2 are v1 or IPv6 link-local
    assert pci["roceP2p1s0f1"] == "0002:01:00.1" and pci["rocep1s0f1"] == "0000:01:00.1"


def test_unreadable_sysfs_and_mtu_leave_unknowns_not_guesses():
    pci, gids = parse_ib_gid(
        "gid rocep1s0f1 3 garbage RoCE v2\npci x not-a-pci\ngid y 99999 "
        "0000:0000:0000:0000:0000:ffff:c0a8:640a RoCE v2\n"
    )
    assert pci == {} and gids == {}
    links = [
        {"ifname": "e", "mtu": "9000", "flags": ["UP"], "operstate": "UP", "addr_info": []},
        {"ifname": "f", "mtu": True, "operstate": "UP", "addr_info": []},
    ]
    assert [i.mtu for i in parse_ip_addr(json.dumps(links))] == [None, None]
    # the section failing outright (sysfs gone mid-probe) costs the GID and PCI only
    text = (
        _section("ip", _sample("ip-addr-spark1.json"))
        + _section("ibdev2netdev", _sample("ibdev2netdev-spark.txt"))
        + _section("ib-gid", "", 1, "cat: /sys/class/infiniband: No such file")
        + "@@sparktui:done@@\n"
    )
    f = parse_probe("spark1", "h", text)
    fab = next(i for i in f.interfaces if i.name == "enp1s0f1np1")
    assert fab.rdma == "rocep1s0f1" and fab.mtu == 9000 and fab.gid_index is None and fab.pci is None


def test_ports_pair_each_half_with_its_twin():
    f = spark_facts(0)
    found = {p.key: [h.name for h in p.halves] for p in ports(f)}
    assert found == {"p1s0f0np0": ["enp1s0f0np0", "enP2p1s0f0np0"], "p1s0f1np1": ["enp1s0f1np1", "enP2p1s0f1np1"]}
    # PCI addresses that disagree split a name-alike pair (two cards in two domains)
    next(i for i in f.interfaces if i.name == "enP2p1s0f1np1").pci = "0002:07:00.1"
    assert len(ports(f)) == 3


# --- the plan -------------------------------------------------------------------------------------


def test_both_halves_addressed_go_into_nccl_ib_hca_with_the_gid_index():
    plan = plan_of([spark_facts(0), spark_facts(1)])
    assert plan.ok, plan.errors
    env = plan.nodes[0].env
    assert env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert env["NCCL_IB_GID_INDEX"] == "3"
    assert "NCCL_IB_SUBNET_AWARE_ROUTING" not in env  # two nodes back to back
    assert not _has(plan.warnings, "idle") and not _has(plan.warnings, "MTU")


def test_idle_twin_half_warns_with_its_cost_and_each_nodes_playbook_commands():
    plan = plan_of([spark_facts(0, twin_down=True), spark_facts(1, twin_down=True)])
    assert plan.ok, plan.errors
    assert plan.nodes[0].env["NCCL_IB_HCA"] == "rocep1s0f1"
    w = next(m for m in plan.warnings if "idle" in m)
    assert "about half the link" in w and "roceP2p1s0f1" in w
    assert "on spark1: `sudo ip addr add 192.168.101.10/24 dev enP2p1s0f1np1 && sudo ip link set enP2p1s0f1np1 up`" in w
    assert "on spark2: `sudo ip addr add 192.168.101.11/24 dev enP2p1s0f1np1" in w


def test_mtu_below_jumbo_warns_and_unequal_mtus_refuse_naming_both():
    plan = plan_of([spark_facts(0, mtu=1500), spark_facts(1, mtu=1500)])
    assert plan.ok and _has(
        plan.warnings,
        "MTU below 9000",
        "spark1 enp1s0f1np1 1500",
        "spark2 enp1s0f1np1 1500",
        "`sudo ip link set enp1s0f1np1 mtu 9000` on spark1",
        "1311",
    )
    plan = plan_of([spark_facts(0, mtu=9000), spark_facts(1, mtu=1500)])
    assert not plan.ok
    assert _has(
        plan.errors,
        "MTUs differ on 192.168.100.0/24",
        "spark1 enp1s0f1np1 MTU 9000",
        "spark2 enp1s0f1np1 MTU 1500",
        "`sudo ip link set enp1s0f1np1 mtu 9000` on spark2",
    )
    # the twin half in use counts too
    plan = plan_of([spark_facts(0), spark_facts(1, mtus={"enP2p1s0f1np1": 1500})])
    assert _has(plan.errors, "MTUs differ on 192.168.101.0/24")


def test_topology_settings_follow_nvidias_playbook():
    two = {n: make_facts(i) for i, n in enumerate(["a", "b"])}
    assert topology(two, ["a", "b"]) == "back-to-back" and topology_env("back-to-back") == {}
    both = {}
    for i, n in enumerate(["a", "b", "c"]):
        f = make_facts(i)
        f.interfaces += [Interface("enp2s0f0np0", [f"192.168.200.{10 + i}/24"], True, "rocep2s0f0", 200000)]
        both[n] = f
    # both ports up on three nodes is NVIDIA's ring test, but subnets that join all three take a switch
    assert topology(both, ["a", "b", "c"]) == "switch"
    for f in both.values():
        for i in f.interfaces[1:]:
            i.ipv4 = []
    assert topology(both, ["a", "b", "c"]) == "ring"  # no fabric addresses yet: the port count decides
    assert topology_env("ring") == {
        "NCCL_IB_SUBNET_AWARE_ROUTING": "1",
        "NCCL_IB_MERGE_NICS": "0",
        "NCCL_NET_PLUGIN": "none",
    }
    four = {n: make_facts(i) for i, n in enumerate("abcd")}
    assert topology(four, list("abcd")) == "switch"
    config = make_config(4)
    facts = {node_name(i): make_facts(i) for i in range(4)}
    plan = make_plan(config, facts, subnets(list(facts.values())), PlanOptions())
    assert plan.nodes[3].env["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1"


def test_line_rate_counts_halves_in_use():
    both = [spark_facts(0), spark_facts(1)]
    by = {f.name: f for f in both}
    found = subnets(both)
    assert line_rate_mbps(by, in_use(by, found[0], found, ["spark1", "spark2"])) == 200000
    one = [spark_facts(0, twin_down=True), spark_facts(1, twin_down=True)]
    by = {f.name: f for f in one}
    found = subnets(one)
    assert line_rate_mbps(by, in_use(by, found[0], found, ["spark1", "spark2"])) == 100000


def test_hosts_that_are_not_sparks_keep_working():
    """An InfiniBand HCA per node (mlx5_0 on ib0): one half per port, no twin warning, no GID index."""
    nodes = []
    for i in range(2):
        f = make_facts(i)
        f.interfaces = [
            Interface("eno1", [f"10.0.0.{11 + i}/24"], True, None, 10000),
            Interface("ib0", [f"10.9.0.{11 + i}/24"], True, "mlx5_0", 400000, mtu=4092, link_type="infiniband"),
        ]
        nodes.append(f)
    plan = plan_of(nodes)
    assert plan.ok, plan.errors
    assert plan.nodes[0].env["NCCL_IB_HCA"] == "mlx5_0" and "NCCL_IB_GID_INDEX" not in plan.nodes[0].env
    assert not _has(plan.warnings, "idle") and not _has(plan.warnings, "MTU")  # IB's 4092 is its own
    by = {f.name: f for f in nodes}
    found = subnets(nodes)
    assert line_rate_mbps(by, in_use(by, found[0], found, ["spark1", "spark2"])) == 400000


def test_node_json_carries_mtu_and_gid():
    f = spark_facts(0)
    row = next(i for i in f.to_json()["interfaces"] if i["name"] == "enp1s0f1np1")
    assert row["mtu"] == 9000 and row["gid_index"] == 3 and row["pci"] == "0000:01:00.1"


# --- images of today ------------------------------------------------------------------------------


def test_vllm_defaults_to_native_where_the_image_has_no_ray():
    from sparktui.core.plan.image import ImageInfo

    from .test_plan import VLLM_IMAGE

    facts = {node_name(i): make_facts(i) for i in range(2)}
    facts["spark1"].images[VLLM_IMAGE] = ImageInfo(
        VLLM_IMAGE, "spark1", id="sha256:" + "ab" * 32, versions={"vllm": "0.31.0", "ray": None, "sglang": None}
    )
    plan = make_plan(make_config(2), facts, subnets(list(facts.values())), PlanOptions(engine="vllm"))
    assert plan.mode == "native" and plan.ok, plan.errors
    assert "has no Ray" in plan.engine_note
    # an old release without native mode keeps ray (and the plan says Ray is missing)
    facts["spark1"].images[VLLM_IMAGE].versions["vllm"] = "0.11.0"
    plan = make_plan(make_config(2), facts, subnets(list(facts.values())), PlanOptions(engine="vllm"))
    assert plan.mode == "ray" and any("has no Ray" in e for e in plan.errors)
    # with Ray inside, Ray mode stays the default; asked for, a mode is kept
    facts["spark1"].images[VLLM_IMAGE].versions.update(vllm="0.31.0", ray="2.60.0")
    assert make_plan(make_config(2), facts, subnets(list(facts.values())), PlanOptions(engine="vllm")).mode == "ray"


def test_default_images_follow_nvidias_playbooks():
    from sparktui.core.config.config import ImagesConfig

    assert ImagesConfig().sglang == "lmsysorg/sglang:latest-cu130"
    root = Path(__file__).resolve().parents[2]
    for example in (root / "config.example.yaml", root / "sparktui" / "config.example.yaml"):
        assert "lmsysorg/sglang:spark" not in example.read_text()


# --- preflight at line rate -----------------------------------------------------------------------


def _verdict(bw: float, fabric: dict, transport: str = "rdma", nccl: str | None = "2.28.9"):
    from sparktui.core.preflight import NodeResult, Setting, Verdict

    s = Setting(addr="192.168.100.10", port=29500, subnet="192.168.100.0/24", image="img", timeout=30, fabric=fabric)
    nodes = {}
    for rank, name in enumerate(("spark1", "spark2")):
        nodes[name] = NodeResult.from_check(
            name,
            rank,
            "enp1s0f1np1",
            f"192.168.100.{10 + rank}",
            {
                "ok": True,
                "path": "nccl",
                "transport": transport,
                "bandwidth_gb_s": bw,
                "nccl": nccl,
                "bandwidth_what": "all-reduce bus bandwidth",
            },
        )
    return Verdict(setting=s, nodes=nodes, seconds=9.0)


def test_preflight_reports_a_share_of_line_rate_and_names_the_likely_causes_in_order():
    one_half = plan_of([spark_facts(0, twin_down=True, mtu=1500), spark_facts(1, twin_down=True, mtu=1500)]).fabric
    v = _verdict(3.04, one_half)  # the ~3 GB/s of NVIDIA/dgx-spark-playbooks#102
    assert v.line_rate_gb_s == 12.5 and round(v.share, 2) == 0.24
    assert "all-reduce bus bandwidth 3.04 GB/s = 24 % of line rate (12.50 GB/s)" in v.summary()
    causes = v.causes
    assert causes[0].startswith("one half of the port in use on spark1, spark2")
    assert causes[1].startswith("MTU spark1 1500, spark2 1500") and "release build" in causes[2]
    j = v.to_json()
    assert j["line_rate_share"] == 0.243 and j["short_of_line_rate"] == causes and j["nccl"] == "2.28.9"
    # sockets first when NCCL fell back although the fabric has RDMA
    assert _verdict(1.1, one_half, transport="socket").causes[0].startswith("NCCL ran over TCP sockets")
    # the check's plain TCP stream (no torch in the image) blames neither NCCL nor the halves
    tcp = _verdict(0.18, one_half, transport="tcp", nccl=None).causes
    assert tcp[0].startswith("a plain TCP stream") and tcp[1].startswith("MTU") and len(tcp) == 2
    # both halves and jumbo frames: 23.74 GB/s of 25 is no shortfall
    both = plan_of([spark_facts(0), spark_facts(1)]).fabric
    v = _verdict(23.74, both)
    assert round(v.share, 2) == 0.95 and v.causes == [] and "95 % of line rate (25.00 GB/s)" in v.summary()


def test_a_nccl_release_with_known_multi_node_hangs_is_flagged():
    both = plan_of([spark_facts(0), spark_facts(1)]).fabric
    v = _verdict(23.0, both, nccl="2.30.4")
    assert v.to_json()["nccl_known_issue"] and "NVIDIA/nccl#2167" in v.summary()
    assert "NVIDIA/nccl#2167" in _verdict(2.0, both, nccl="2.30.4").causes[-1]
    assert _verdict(23.0, both, nccl="2.28.9").to_json()["nccl_known_issue"] is None


def test_check_says_what_an_image_holds():
    from sparktui.core.plan.image import ImageInfo, holds

    info = ImageInfo(
        "nvcr.io/nvidia/vllm:26.10-py3",
        "spark1",
        versions={
            "vllm": "0.31.0",
            "sglang": None,
            "ray": None,
            "torch": "2.9.1+cu130",
            "nvidia-nccl-cu13": None,
            "nvidia-nccl-cu12": None,
        },
    )
    assert holds(info) == "vLLM 0.31.0, no Ray, torch 2.9.1 (CUDA 13.0)"
    info.versions.update(ray="2.60.0", **{"nvidia-nccl-cu13": "2.27.7"})
    assert holds(info) == "vLLM 0.31.0, Ray 2.60.0, torch 2.9.1 (CUDA 13.0), NCCL 2.27.7 (pip)"
    assert holds(ImageInfo("x", problem="x is not on spark1")) == "x is not on spark1"


def test_check_reads_only_the_cache_and_an_old_cache_entry_leaves_torch_unknown():
    from sparktui.core.plan.image import inspect_script, parse_inspection

    script = inspect_script("img:1", 30, run_image=False)
    assert "docker run" not in script.split("uncached")[0] and "uncached'; exit 0" in script
    m = "@@sparktui-image "
    head = f'{m}inspect\n{{"Cmd": null}}\nsha256:{"ab" * 32}\n'
    info = parse_inspection("img:1", "spark1", head + f"{m}uncached\n")
    assert info.problem and "not read yet" in info.problem and info.versions == {}
    old = parse_inspection("img:1", "spark1", head + f'{m}cached\n{{"vllm": "0.31.0", "sglang": null, "ray": null}}\n')
    assert old.has("ray") is False and old.has("torch") is None  # never asked: unknown, not absent
