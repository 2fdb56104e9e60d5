"""The log follower's chunk path: lines split once, docker's timestamp kept, secrets masked, repeats dropped."""
from __future__ import annotations

from sparktui.core.deploy.logstream import Deduper, LogFollower, LogLine, split_ts
from sparktui.core.secrets import needs_mask


def follower() -> tuple[LogFollower, list[LogLine]]:
    got: list[LogLine] = []
    return LogFollower(None, "c", got.extend, batch_interval=0.0), got  # type: ignore[arg-type]


def test_a_chunk_becomes_stamped_lines_and_an_echoed_secret_is_masked():
    f, got = follower()
    chunk = ("2026-01-01T10:00:00.5Z loading shard 1\r\n"
             "2026-01-01T10:00:01Z server_args=ServerArgs(api_key='short', port=30000)\n")
    assert needs_mask(chunk) and not needs_mask("2026-01-01T10:00:00.5Z loading shard 1\n")
    assert f._take(chunk.split("\n")[:-1], needs_mask(chunk)) == 2
    assert [(ln.ts, ln.text) for ln in got] == [
        ("2026-01-01T10:00:00.5Z", "loading shard 1"),
        ("2026-01-01T10:00:01Z", "server_args=ServerArgs(api_key='****', port=30000)")]
    assert got[0].key == split_ts("2026-01-01T10:00:00.5Z x").key and got[0].seconds is not None


def test_a_resumed_read_skips_exactly_the_lines_already_taken_at_the_boundary():
    d = Deduper()
    first = [split_ts(f"2026-01-01T00:00:0{s}Z {t}") for s, t in ((1, "a"), (2, "b"), (2, "b"), (2, "c"))]
    assert d.take(first) == first
    d.begin_pass()  # docker repeats every line at the resume instant, then goes on
    again = [split_ts(f"2026-01-01T00:00:0{s}Z {t}") for s, t in ((2, "b"), (2, "b"), (2, "c"), (2, "c"), (3, "d"))]
    assert [ln.text for ln in d.take(again)] == ["c", "d"]  # the second c is new; so is d
    assert d.last_ts == "2026-01-01T00:00:03Z"
    late = split_ts("2026-01-01T00:00:03Z d")
    assert d.take([late]) == [late]  # once past the boundary, a line equal to an old one is not skipped
