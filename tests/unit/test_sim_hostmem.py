"""The simulator's node memory accounting (sim/hostmem.py): only on a stand-in file, adding up, given back."""

from __future__ import annotations

import multiprocessing
import re

from sparktui.demo import hardware, pagecache
from sparktui.sim import hostmem


def available_kb(path) -> int:
    return int(re.search(r"^MemAvailable:\s+(\d+)", path.read_text(), re.M).group(1))


def test_the_real_meminfo_and_missing_or_empty_files_are_never_touched(tmp_path, monkeypatch):
    assert not hostmem.usable("/proc/meminfo") and not hostmem.usable("/proc/self/../meminfo")
    assert not hostmem.usable(tmp_path / "none") and not hostmem.usable(None)
    (tmp_path / "empty").write_text("")
    assert not hostmem.usable(tmp_path / "empty")
    monkeypatch.setenv(hostmem.MEMINFO_ENV, "/proc/meminfo")
    mem = hostmem.EngineMemory()
    assert not mem.enabled
    mem.set("weights", 10.0)  # nothing happens, nothing is written
    monkeypatch.delenv(hostmem.MEMINFO_ENV)
    assert not hostmem.EngineMemory().enabled


def _take(meminfo: str, ledger: str, gib: float, rounds: int) -> None:
    import os

    os.environ[hostmem.MEMINFO_ENV], os.environ[hostmem.LEDGER_ENV] = meminfo, ledger
    mem = hostmem.EngineMemory()
    for k in range(1, rounds + 1):
        mem.set("weights", gib * k / rounds)


def test_engines_on_one_node_add_up_and_their_ledger_gives_it_back(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(hardware.meminfo())
    start = available_kb(meminfo)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_take, args=(str(meminfo), str(tmp_path / f"c{i}"), 2.0, 50)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    # read-modify-write under the lock: no update lost between the three
    assert start - available_kb(meminfo) == 3 * 2 * (1 << 20)
    # a page cache drop on the node in between leaves the engines' share alone
    pagecache.rewrite(meminfo, pagecache.drop_page_cache)
    for i in range(3):  # each container's end hands back what its processes held
        hostmem.release_ledger(tmp_path / f"c{i}")
        assert start - available_kb(meminfo) == (2 - i) * 2 * (1 << 20)
    assert not list((tmp_path / "c0").iterdir())


def test_an_allocation_stops_at_an_empty_node_and_comes_back_whole(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(hardware.meminfo(available_kb=4 << 20))
    before = meminfo.read_text()
    monkeypatch.setenv(hostmem.MEMINFO_ENV, str(meminfo))
    monkeypatch.setenv(hostmem.LEDGER_ENV, str(tmp_path / "held"))
    mem = hostmem.EngineMemory()
    mem.set("kv", 10.0)
    assert available_kb(meminfo) == 0 and "MemFree:              0 kB" in meminfo.read_text()
    mem.release()
    assert meminfo.read_text() == before
