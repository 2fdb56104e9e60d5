"""What the launch form offers, and how it reads what was typed."""

from __future__ import annotations

from sparktui.core.nodes.inventory import analyse
from sparktui.tui.forms import choices as C

from .samples import spark_config, spark_facts


def test_parallel_products_match_the_gpus():
    assert [v for _, v in C.parallel_options(2)] == ["2:1", "1:2"]
    values = [v for _, v in C.parallel_options(8)]
    assert all(int(t) * int(p) == 8 for t, p in (v.split(":") for v in values))
    assert len(values) == 4  # 8, 4, 2, 1
    # a TP that does not divide the attention heads is not offered
    assert "8:1" not in [v for _, v in C.parallel_options(8, heads=12)]
    assert C.parallel_options(0)[0][1] == "1:1"


def test_gpu_total_counts_reachable_nodes():
    facts = spark_facts()
    assert C.gpu_total(facts, ["spark1", "spark2"]) == 2
    facts["spark2"].reachable = False
    assert C.gpu_total(facts, ["spark1", "spark2"]) == 2  # an unreachable node still takes a rank
    assert C.gpu_total({}, ["a"]) == 0


def test_images_on_every_node_first_and_default_always_offered():
    facts = spark_facts()
    facts["spark2"].docker.images = {"lmsysorg/sglang:spark": "sha256:aa"}
    opts = C.image_options(facts, ["spark1", "spark2"], "nvcr.io/nvidia/vllm:26.10-py3", "vllm")
    values = [v for _, v in opts]
    assert values[0] == "lmsysorg/sglang:spark"  # on all nodes
    labels = dict((v, lbl) for lbl, v in opts)
    assert "only spark1" in labels["nvcr.io/nvidia/vllm:26.10-py3"]
    missing = C.image_options(facts, ["spark1", "spark2"], "repo/new:1", "sglang")
    assert "not on any node" in dict((v, lbl) for lbl, v in missing)["repo/new:1"]


def test_subnets_join_all_nodes_and_management_is_flagged():
    cfg = spark_config()
    inv = analyse(cfg, spark_facts())
    opts = C.subnet_options(inv.subnets, ["spark1", "spark2"])
    assert [v for _, v in opts][:2] == [C.AUTO, "192.168.100.0/24"]  # the fabric unless chosen otherwise
    # with an RDMA fabric joining them, the management subnet bootstraps and the HCAs carry the data
    mgmt = next(lbl for lbl, v in opts if v == "192.168.1.0/24")
    assert "management: bootstrap here, data over RDMA on 192.168.100.0/24" in mgmt and "TCP" not in mgmt
    management = next(s for s in inv.subnets if s.management)
    detail = C.subnet_detail(management, ["spark1", "spark2"], inv.subnets).plain
    assert "data goes over RDMA on 192.168.100.0/24" in detail and "spark2 enP7s7 192.168.1.102" in detail
    # without one, NCCL would run over TCP there
    bare = [s for s in inv.subnets if not s.rdma]
    assert (
        "⚠ management: NCCL over TCP"
        in dict((v, lbl) for lbl, v in C.subnet_options(bare, ["spark1", "spark2"]))["192.168.1.0/24"]
    )
    assert "NCCL would run over TCP" in C.subnet_detail(management, ["spark1", "spark2"], bare).plain
    assert C.subnet_options(inv.subnets, ["spark1", "spark9"]) == [("auto: the fabric", C.AUTO)]
    assert C.parse_form(C.FormValues(rendezvous=C.AUTO), ["spark1"]).options.rendezvous is None


def test_parse_form_reports_fields_inline():
    v = C.FormValues(
        engine="vllm:ray", parallel="2:1", port="80x", dist_port="70000", mem_fraction="1.5", ray_port="6379"
    )
    parsed = C.parse_form(v, ["spark1", "spark2"])
    assert set(parsed.errors) == {"port", "dist_port", "mem_fraction"}
    o = parsed.options
    assert (o.engine, o.mode, o.tp, o.pp, o.ray_port) == ("vllm", "ray", 2, 1, 6379)
    assert o.port is None and o.mem_fraction is None  # bad values fall back, so the preview still renders
    good = C.parse_form(C.defaults(spark_config(), "sglang"), ["spark1", "spark2"])
    assert (
        good.errors == {} and good.options.port == 30000 and good.options.mem_fraction == 0.75
    )  # NVIDIA's SGLang default
