"""Free memory per node, page cache counted: the plan warns, names the node and offers drop-caches."""

from __future__ import annotations

from sparktui.core.memory.free import DROP_SCRIPT, shortfalls
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.nodes.probes import parse_meminfo

from .test_plan import GIB, cluster

# A Spark right after receiving a 118 GiB checkpoint: most of its memory is page cache.
AFTER_COPY = """MemTotal:       125514352 kB
MemFree:         9832112 kB
MemAvailable:   119883220 kB
Buffers:          112640 kB
Cached:        108240512 kB
"""


def test_meminfo_keeps_free_and_page_cache_apart():
    m = parse_meminfo(AFTER_COPY)
    assert m.free_bytes == 9832112 * 1024
    assert m.cached_bytes == (108240512 + 112640) * 1024
    assert m.available_bytes > m.free_bytes  # the kernel counts the cache as available; the GPU does not


def test_a_node_full_of_page_cache_is_named_with_drop_caches_as_the_fix():
    config, facts, subnets = cluster(2)
    facts["spark2"].memory = parse_meminfo(AFTER_COPY)
    plan = make_plan(config, facts, subnets, PlanOptions(engine="vllm", mem_fraction=0.8))
    warns = [w for w in plan.warnings if w.startswith("free memory")]
    assert len(warns) == 1 and "spark2" in warns[0] and "spark1" not in warns[0]
    assert "sparktui drop-caches spark2" in warns[0] and "page cache" in warns[0]


def test_memory_held_by_programs_is_not_blamed_on_the_cache():
    config, facts, subnets = cluster(2)
    m = parse_meminfo(AFTER_COPY)
    m.cached_bytes = 1 * GIB  # little cache: something else holds the memory
    facts["spark1"].memory = m
    (short,) = shortfalls(facts, ["spark1", "spark2"], 0.8)
    assert not short.cache_would_do
    assert "drop-caches" not in short.message() and "lower the memory fraction" in short.message()


def test_enough_free_memory_says_nothing():
    config, facts, subnets = cluster(2)
    for f in facts.values():
        f.memory.free_bytes, f.memory.cached_bytes = f.memory.total_bytes, 0
    assert shortfalls(facts, list(facts), 0.85) == []
    plan = make_plan(config, facts, subnets, PlanOptions(engine="sglang"))
    assert not [w for w in plan.warnings if w.startswith("free memory")]


def test_the_drop_never_waits_for_a_password():
    assert "sudo -n" in DROP_SCRIPT and "/proc/sys/vm/drop_caches" in DROP_SCRIPT


# -- the preflight's verdict on free memory --------------------------------------------------------

from sparktui.core.memory.free import DROP_CACHES, DropPreview, measure, parse_drop  # noqa: E402
from sparktui.core.preflight import NodeResult, Setting, Verdict, judge_memory  # noqa: E402
from sparktui.core.preflight.remote import parse_look  # noqa: E402

ROOMY = AFTER_COPY.replace("MemFree:         9832112", "MemFree:       118000000").replace("108240512", "2000000")


def ok_verdict(*names: str) -> Verdict:
    v = Verdict(Setting("10.0.0.1", 29500, "10.0.0.0/24", "img", 30.0))
    for rank, n in enumerate(names):
        v.nodes[n] = NodeResult(n, rank, ok=True, transport="tcp")
    return v


def test_the_preflight_look_reads_meminfo_in_its_one_round_trip():
    look = parse_look("@@ip\n[]\n@@image\nsha256:" + "a" * 64 + "\n@@rc 0\n@@ib\nno\n@@tcp\n@@mem\n" + AFTER_COPY)
    assert look.memory is not None and look.memory.free_bytes == 9832112 * 1024
    assert parse_look("@@ip\n[]\n@@mem\n").memory is None  # no meminfo: unknown, never "0 free"


def test_a_node_short_of_free_memory_fails_the_preflight_and_says_a_drop_would_do():
    v = ok_verdict("spark1", "spark2")
    judge_memory(v, {"spark1": parse_meminfo(ROOMY), "spark2": parse_meminfo(AFTER_COPY)}, ["spark1", "spark2"], 0.85)
    assert not v.ok and v.root.node == "spark2" and v.root.kind == "memory"
    assert v.nodes["spark1"].ok and not v.nodes["spark1"].memory.short
    assert "would refuse to start" in v.reason and "page cache, which dropping would free" in v.reason
    assert "sparktui drop-caches spark2" in v.fix
    assert v.droppable == ["spark2"]
    lines = v.summary().splitlines()
    assert any(ln.startswith("  spark1") and "memory ok" in ln for ln in lines)
    assert any(ln.startswith("  spark2") and "failed (low memory)" in ln for ln in lines)
    j = v.to_json()
    assert j["drop_caches"] == ["spark2"] and j["nodes"][1]["memory"]["cache_would_do"] is True


def test_memory_held_by_programs_fails_without_offering_a_drop():
    m = parse_meminfo(AFTER_COPY)
    m.cached_bytes = 1 << 30
    v = ok_verdict("spark1")
    judge_memory(v, {"spark1": m}, ["spark1"], 0.85)
    assert not v.ok and v.droppable == [] and "would not make up for it" in v.reason
    assert "drop-caches" not in v.fix and "lower the memory fraction" in v.fix


def test_discrete_gpus_and_unknown_meminfo_are_not_judged():
    v = ok_verdict("gpu1", "spark2")
    judge_memory(v, {"gpu1": parse_meminfo(AFTER_COPY), "spark2": None}, ["spark2"], 0.85)
    assert v.ok and v.nodes["gpu1"].memory is None and v.nodes["spark2"].memory is None


def test_a_rendezvous_failure_stays_the_reason_and_the_memory_becomes_a_warning():
    v = ok_verdict("spark1")
    v.nodes["spark1"].ok, v.nodes["spark1"].kind = False, "unreachable"
    judge_memory(v, {"spark1": parse_meminfo(AFTER_COPY)}, ["spark1"], 0.85)
    assert v.root.kind == "unreachable" and v.droppable == ["spark1"]
    assert any(w.startswith("free memory: spark1") for w in v.warnings)


def test_the_drop_confirmation_names_the_command_the_node_and_what_it_knows():
    known = measure("spark2", parse_meminfo(AFTER_COPY), 0.85)
    p = DropPreview(["spark2"], {"spark2": known})
    assert p.title == "Drop the page cache on spark2"
    assert p.lines()[0] == f"spark2: run `{DROP_CACHES}` as root, or through sudo -n (never a password prompt)"
    assert "9.4 GiB free, 103.3 GiB page cache; the engine asks for 101.7 GiB" in p.lines()[1]
    assert p.text().startswith("Drop the page cache on spark2:\n  spark2: run `sync; echo 3")
    assert len(DropPreview(["a", "b"]).lines()) == 3  # one line a node, then what it costs


def test_a_drop_reports_free_memory_before_and_after():
    after = AFTER_COPY.replace("MemFree:         9832112", "MemFree:       117500000").replace("108240512", "600000")
    d = parse_drop("spark2", True, AFTER_COPY + "@@after\n" + after, "", 0)
    assert d.ok and d.before.free_bytes == 9832112 * 1024 and d.free_after == 117500000 * 1024
    assert d.summary() == "spark2: page cache dropped, free 9.4 GiB -> 112.1 GiB (page cache 103.3 GiB -> 0.7 GiB)"
    assert d.to_json()["free_before"] == 9832112 * 1024


def test_a_refused_drop_says_it_needs_root_or_passwordless_sudo():
    d = parse_drop("spark2", False, AFTER_COPY + "@@after\n", "sudo: a password is required\n", 1)
    assert not d.ok and d.before is not None and d.after is None
    assert (
        d.summary() == "spark2: not dropped: sudo: a password is required (needs root or passwordless sudo on the node)"
    )
