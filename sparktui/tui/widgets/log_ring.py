"""The log view's store: one bounded sequence of lines (sort key, node index, text), kept in order.

Older lines sit in fixed-size blocks of tuples; only the newest few thousand, where a late line may
still be sorted in, are in lists. A tuple of strings and numbers is dropped from the garbage
collector's watch, while a list is walked item by item on every full collection: a 100k-line ring
held in lists cost each pass 10-90 ms, keys and frames waiting behind it.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import chain, islice, repeat
from operator import itemgetter, le
from typing import Iterator

Key = int  # docker's time, in nanoseconds since the epoch


class Ring:
    """Positions count every line ever added: the first line held is at `base`."""

    def __init__(self, block: int = 4096, reorder: int = 2000) -> None:
        self.block = block
        self.reorder = reorder  # a late line is placed among at most this many newest lines
        self.base = 0
        self._blocks: list[tuple[tuple, tuple, tuple]] = []  # (keys, nodes, texts), `block` lines each
        self._skip = 0  # lines of the first block already dropped from the top
        self._keys: list[Key] = []  # the tail, in lists
        self._nodes: list[int] = []
        self._texts: list[str] = []

    def __len__(self) -> int:
        return len(self._blocks) * self.block - self._skip + len(self._texts)

    @property
    def end(self) -> int:
        """The position the next line will take."""
        return self.base + len(self)

    @property
    def last_key(self) -> Key | None:
        if self._keys:
            return self._keys[-1]
        return self._blocks[-1][0][-1] if self._blocks else None

    def get(self, pos: int) -> tuple[int, str]:
        """(node index, text) at a held position."""
        j = pos - self.base + self._skip
        b, n = divmod(j, self.block)
        if b < len(self._blocks):
            blk = self._blocks[b]
            return blk[1][n], blk[2][n]
        j -= len(self._blocks) * self.block
        return self._nodes[j], self._texts[j]

    def rows_from(self, pos: int) -> Iterator[tuple[int, str]]:
        """(node index, text) of every line from `pos` on."""
        j = max(0, pos - self.base) + self._skip
        first = j // self.block
        parts = []
        for b in range(first, len(self._blocks)):
            _, nodes, texts = self._blocks[b]
            start = j - b * self.block if b == first else 0
            parts.append(zip(islice(nodes, start, None), islice(texts, start, None)))
        start = max(0, j - len(self._blocks) * self.block)
        parts.append(zip(islice(self._nodes, start, None), islice(self._texts, start, None)))
        return chain.from_iterable(parts)

    def add(self, parts: list[tuple[int, list, list[str]]]) -> int:
        """Put (node index, keys, texts) batches in by key; returns the first position that changed.
        Equal keys keep their order of arrival."""
        keys, nodes, texts = self._keys, self._nodes, self._texts
        end = self.end
        tail_at = end - len(keys)  # the position of the tail's first line
        last = self.last_key
        if len(parts) == 1 and (last is None or parts[0][1][0] >= last):
            ix, k, t = parts[0]
            if all(map(le, k, islice(k, 1, None))):  # docker's order (stdout and stderr may cross)
                keys += k
                nodes += repeat(ix, len(t))
                texts += t
                self._settle()
                return end
        lo = min(min(k) for _, k, _ in parts)
        at = bisect_right(keys, lo, max(0, len(keys) - self.reorder))
        ks, ns, ts = keys[at:], nodes[at:], texts[at:]
        for ix, k, t in parts:
            ks += k
            ns += repeat(ix, len(t))
            ts += t
        # Sort positions, not rows: a tuple per row would be a flood of objects for the collector.
        order = sorted(range(len(ks)), key=ks.__getitem__)  # stable
        if len(order) > 1:
            pick = itemgetter(*order)
            keys[at:], nodes[at:], texts[at:] = pick(ks), pick(ns), pick(ts)
        else:
            keys[at:], nodes[at:], texts[at:] = ks, ns, ts
        self._settle()
        return tail_at + at

    def _settle(self) -> None:
        """Move the oldest tail lines into a block once the tail has more than it needs for sorting in."""
        size = self.block
        while len(self._texts) >= self.reorder + 2 * size:
            self._blocks.append((tuple(self._keys[:size]), tuple(self._nodes[:size]), tuple(self._texts[:size])))
            del self._keys[:size], self._nodes[:size], self._texts[:size]

    def drop(self, count: int) -> None:
        """Forget the `count` oldest lines."""
        count = min(count, len(self))
        self.base += count
        j = self._skip + count
        whole = min(j // self.block, len(self._blocks))
        del self._blocks[:whole]
        j -= whole * self.block
        if self._blocks:
            self._skip = j
        else:
            self._skip = 0
            del self._keys[:j], self._nodes[:j], self._texts[:j]
