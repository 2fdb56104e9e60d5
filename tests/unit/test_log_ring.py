"""The log view's store: blocks of tuples for old lines, lists for the newest, read as one ordered sequence."""

from __future__ import annotations

from bisect import bisect_right

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.tui.widgets.log_ring import Ring


class Plain:
    """The same store as three plain lists: what the ring must always read as."""

    def __init__(self, reorder: int) -> None:
        self.reorder, self.base, self.rows = reorder, 0, []

    def add(self, parts) -> int:
        new = [(k, ix, t) for ix, ks, ts in parts for k, t in zip(ks, ts)]
        keys = [r[0] for r in self.rows]
        lo = min(r[0] for r in new)
        at = bisect_right(keys, lo, max(0, len(keys) - self.reorder))
        if len(parts) == 1 and (not keys or parts[0][1][0] >= keys[-1]) and parts[0][1] == sorted(parts[0][1]):
            at = len(keys)
        self.rows[at:] = sorted(self.rows[at:] + new, key=lambda r: r[0])  # stable
        return self.base + at

    def drop(self, n: int) -> None:
        n = min(n, len(self.rows))
        del self.rows[:n]
        self.base += n


batch = st.lists(st.integers(0, 40), min_size=1, max_size=9)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.lists(st.tuples(st.integers(0, 2), batch), min_size=1, max_size=3)),
            st.tuples(st.just("drop"), st.integers(0, 30)),
        ),
        max_size=25,
    ),
    sorted_batches=st.booleans(),
)
def test_the_ring_reads_exactly_like_plain_lists_through_adds_and_drops(steps, sorted_batches):
    ring, plain = Ring(block=4, reorder=5), Plain(reorder=5)
    serial = 0
    for op, arg in steps:
        if op == "drop":
            ring.drop(arg)
            plain.drop(arg)
        else:
            parts = []
            for ix, ks in arg:
                ks = sorted(ks) if sorted_batches else ks
                parts.append((ix, list(ks), [f"line {serial + i}" for i in range(len(ks))]))
                serial += len(ks)
            assert ring.add(parts) == plain.add(parts)
        assert len(ring) == len(plain.rows) and ring.base == plain.base and ring.end == plain.base + len(plain.rows)
        assert ring.last_key == (plain.rows[-1][0] if plain.rows else None)
        assert [ring.get(plain.base + i) for i in range(len(plain.rows))] == [(ix, t) for _, ix, t in plain.rows]
        for start in (plain.base, plain.base + len(plain.rows) // 2, plain.base + len(plain.rows)):
            assert list(ring.rows_from(start)) == [(ix, t) for _, ix, t in plain.rows[start - plain.base :]]


def test_old_lines_leave_the_lists_for_blocks():
    ring = Ring(block=100, reorder=50)
    for i in range(10):
        ring.add([(0, [(i, n) for n in range(100)], [f"{i}.{n}" for n in range(100)])])
    assert len(ring) == 1000 and len(ring._texts) < 250 and all(isinstance(b[2], tuple) for b in ring._blocks)
    ring.drop(130)  # into the second block
    assert ring.get(ring.base) == (0, "1.30") and list(ring.rows_from(0))[0] == (0, "1.30")
