"""Free memory per node, page cache counted: the plan warns, names the node and offers drop-caches."""
from __future__ import annotations

from sparktui.core.memfree import DROP_SCRIPT, shortfalls
from sparktui.core.plan import PlanOptions, make_plan
from sparktui.core.probes import parse_meminfo

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
