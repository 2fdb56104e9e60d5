"""The semaphore trap read from the logs: a worker's SemLock._rebuild FileNotFoundError together with the
head's shm_broadcast wait, on any nodes and in either order, is named as the trap with logind's fix;
either line alone keeps its own meaning."""

from __future__ import annotations

from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.diagnosis.logevents import ProblemCleared

WAIT = (
    "(EngineCore pid=397) INFO 09-02 11:53:04 [shm_broadcast.py:801] No available shared memory broadcast block "
    "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming "
    "work (e.g. compilation, weight/kv cache quantization)."
)
SEMLOCK = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/multiprocessing/spawn.py", line 122, in spawn_main',
    "    exitcode = _main(fd, parent_sentinel)",
    '  File "/usr/lib/python3.12/multiprocessing/synchronize.py", line 115, in __setstate__',
    "    self._semlock = _multiprocessing.SemLock._rebuild(*state)",
    "FileNotFoundError: [Errno 2] No such file or directory",
]
READY = "(APIServer pid=48) INFO:     Application startup complete."


def _kinds(d: Diagnoser) -> list[str]:
    return [p.kind for p in d.ordered_problems()]


def test_a_lost_semaphore_alone_is_named_with_both_causes():
    d = Diagnoser("vllm")
    d.feed_lines(SEMLOCK, node="spark2")
    d.finish()
    (p,) = [p for p in d.ordered_problems() if not p.provisional]
    assert p.kind == "semaphore_lost" and p.node == "spark2" and "parent exited first" in p.hint
    assert "traceback" not in _kinds(d)


def test_the_worker_s_lost_semaphore_then_the_head_s_wait_is_the_trap():
    d = Diagnoser("vllm")
    d.feed_lines(SEMLOCK, node="spark2")
    events = d.feed(WAIT, node="spark1")
    assert any(isinstance(e, ProblemCleared) and e.problem.kind == "semaphore_lost" for e in events)
    d.feed(WAIT, node="spark1")  # the head goes on waiting: nothing new
    assert _kinds(d) == ["semaphore_trap"]
    (p,) = d.problems
    assert "enable-linger" in p.hint and "RemoveIPC=no" in p.hint and d.state == "failed"


def test_a_wedge_read_first_gives_way_to_the_trap_when_the_worker_s_log_arrives():
    d = Diagnoser("vllm")
    d.feed(READY, node="spark1")
    d.feed(WAIT, node="spark1")
    d.feed(WAIT, node="spark1")
    assert "wedged" in _kinds(d)
    events = d.feed_lines(SEMLOCK, node="spark2")
    assert any(isinstance(e, ProblemCleared) and e.problem.kind == "wedged" for e in events)
    assert _kinds(d) == ["semaphore_trap"]


def test_the_wait_alone_after_ready_still_reads_as_a_wedge():
    d = Diagnoser("vllm")
    d.feed(READY)
    d.feed(WAIT)
    d.feed(WAIT)
    assert _kinds(d) == ["wedged"]
