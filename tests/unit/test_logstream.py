"""The log follower's chunk path: lines split once, docker's timestamp kept, secrets masked, repeats dropped."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.deploy.logstream import Deduper, LogFollower, LogLine, split_ts
from sparktui.core.config.secrets import needs_mask


def follower() -> tuple[LogFollower, list[LogLine]]:
    got: list[LogLine] = []
    return LogFollower(None, "c", got.extend, batch_interval=0.0), got  # type: ignore[arg-type]


def test_a_chunk_becomes_stamped_lines_and_an_echoed_secret_is_masked():
    f, got = follower()
    chunk = (
        "2026-01-01T10:00:00.5Z loading shard 1\r\n"
        "2026-01-01T10:00:01Z server_args=ServerArgs(api_key='short', port=30000)\n"
    )
    assert needs_mask(chunk) and not needs_mask("2026-01-01T10:00:00.5Z loading shard 1\n")
    assert f._take(chunk.split("\n")[:-1], needs_mask(chunk)) == 2
    assert [(ln.ts, ln.text) for ln in got] == [
        ("2026-01-01T10:00:00.5Z", "loading shard 1"),
        ("2026-01-01T10:00:01Z", "server_args=ServerArgs(api_key='****', port=30000)"),
    ]
    assert got[0].key == split_ts("2026-01-01T10:00:00.5Z x").key and got[0].seconds is not None


class ChunkNode:
    """A node whose `docker logs` comes in the given chunks."""

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    async def stream_chunks(self, argv):
        for chunk in self.chunks:
            yield chunk


async def test_a_secret_cut_by_a_chunk_boundary_is_still_masked():
    line = "2026-01-01T10:00:01.000000001Z export HF_TOKEN=hf_abcdefgh\n"
    cut = line.index("TOKEN") + 2  # neither chunk holds the whole name
    got: list[LogLine] = []
    f = LogFollower(ChunkNode([line[:cut], line[cut:]]), "c", got.extend, batch_interval=0.0)  # type: ignore[arg-type]
    assert await f._one_pass() == (1, False)
    assert [ln.text for ln in got] == ["export HF_TOKEN=****"]


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


def test_a_chunk_splits_into_columns_whatever_form_the_timestamp_takes():
    from sparktui.core.diagnosis.dockerts import split, split_many

    raws = [
        "2026-01-01T10:00:00.000000005Z today's form\r",
        "2026-01-01T10:00:00.000000005Z ",
        "2026-01-01T10:00:00.5Z trimmed",
        "2026-01-01T12:00:01.25+02:00 zoned",
        "Error response from daemon",
        "2026-01-01T10:00:0x.000000005Z not a time",
        "",
        "2026-01-01T10:00:02.00000001\uff15Z wide digit",
    ]
    ts, keys, texts = split_many(raws)
    assert list(zip(ts, keys, texts)) == [split(r.rstrip("\r")) for r in raws]
    assert keys[0] == keys[1] == keys[2] - 500_000_000 + 5 and texts[:2] == ["today's form", ""]
    assert keys[3] == keys[2] + 750_000_000 and keys[4] is None and keys[5] is None


def _stamped(seconds_and_texts):
    return [split_ts(f"2026-01-01T00:00:{s:02d}.000000001Z {t}") for s, t in seconds_and_texts]


@settings(max_examples=400, deadline=None)
@given(
    passes=st.lists(
        st.lists(st.lists(st.tuples(st.integers(0, 6), st.sampled_from("abc")), max_size=6), min_size=1, max_size=3),
        min_size=1,
        max_size=4,
    ),
    orderly=st.booleans(),
    untimed=st.booleans(),
)
def test_whole_chunks_are_deduplicated_exactly_like_line_by_line(passes, orderly, untimed):
    one, whole = Deduper(), Deduper()
    for i, chunks in enumerate(passes):  # each pass is a resumed read, arriving in a few chunks
        one.begin_pass()
        whole.begin_pass()
        for lines in chunks:
            chunk = _stamped(sorted(lines) if orderly else lines)
            if untimed and i == 1:
                chunk.append(split_ts("docker: an error without a timestamp"))
            expected = [ln for ln in chunk if one.accept(ln)]
            ts, keys, texts = whole.take_columns([x.ts for x in chunk], [x.key for x in chunk], [x.text for x in chunk])
            assert list(map(LogLine, ts, keys, texts)) == expected
            assert (whole.last, whole.last_ts, whole._at_last) == (one.last, one.last_ts, one._at_last)


def test_the_follower_hands_out_batches_as_columns_that_still_read_as_lines():
    f, got = follower()
    batches = []
    f.on_lines = lambda b: (batches.append(b), got.extend(b))
    f._take([f"2026-01-01T10:00:00.00000000{i}Z line {i}" for i in range(1, 4)], False)
    (b,) = batches
    assert len(b) == 3 and b.texts == ["line 1", "line 2", "line 3"] and b.keys[0] == got[0].key
    assert b[2] == got[2] == LogLine("2026-01-01T10:00:00.000000003Z", b.keys[2], "line 3")
    assert list(b[1:]) == got[1:] and b[-1] == got[-1]
