"""Diagnoser.feed_batch: a batch of one node's lines at once, with the same outcome as feed() per line.

A flood is mostly lines that no milestone, phase or failure signature can match. Every such pattern
names literal text a match must hold (quickre), so one substring scan of the joined batch tells which
of those texts occur at all; a line holding none of them is only counted and timed, as feed() would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engines import logsigns as S
from .phases import NODE_TAG

if TYPE_CHECKING:
    from .logevents import Event


class BatchFeed:
    _needs: tuple | None | bool = False  # worked out on first use

    def feed_batch(self, texts: list[str], node: str | None, times: list[float | None]) -> list[Event]:
        """feed() for a batch of one node's lines (without docker's prefix), each with its reported
        time: the same events and state. Most lines of a flood can match no pattern at all: one
        substring scan of the whole batch finds them, and they are only counted and timed."""
        needs = self._quick_needs()
        if needs is None:
            return [e for text, now in zip(texts, times) for e in self.feed(text, node, now)]
        joined = "\n".join(texts)
        plain = [n for n in needs[0] if n in joined]
        folded = [n for n in needs[1] if n in joined.lower()] if needs[1] else []
        out: list[Event] = []
        for text, now in zip(texts, times):
            ns = self._nodes.get(node)
            pn = self.phases.nodes.get(node)
            if (
                ns is None
                or ns.tb is not None
                or "started" not in ns.seen
                or pn is None
                or not pn.ranks
                or "\r" in text
                or "\n" in text
                or not text.isascii()
                or text[10:11] == "T"
                or (plain and any(n in text for n in plain))
                or (folded and any(n in text.lower() for n in folded))
            ):
                out += self.feed(text, node, now)
                continue
            # A line no pattern can match: what feed() does with it, without trying them.
            ns.lines += 1
            t = now if now is not None else self.clock()
            if ns.last_at is not None:
                out += self._silence(ns, node, t, ns.lines - 1)
            ns.last_at = t
            pn.lines = ns.lines
            stripped = text.strip()
            if stripped:
                pn.last_text = stripped[:300]
        return out

    def _quick_needs(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The literal texts (as they are, and lower-case for case-blind patterns) of which a line
        must hold one to match any pattern feed() tries; None when some pattern has none."""
        if self._needs is False:
            pats = [
                S.TRACEBACK,
                S.FRAME,
                S.CUSTOM_ALLREDUCE_OFF,
                S.RAY_STARTED,
                S.RAY_CONNECTED,
                S.RAY_LOCAL,
                S.WEIGHTS_PERCENT,
                S.WEIGHTS_BEGIN,
                S.WEIGHTS_END,
                S.SLOW_LOAD,
                S.KV_SGLANG,
                S.KV_SGLANG_MLA,
                S.KV_TOKENS,
                S.KV_MEMORY,
                S.GRAPH_BEGIN,
                S.GRAPH_END,
                S.NCCL_RDMA,
                S.NCCL_SOCKET,
                S.GLOO_BACKEND,
                S.SERVING,
                NODE_TAG,
                *(rx for _, rx in self.phases.signs),
                *self.rules.patterns,
            ]
            if any(getattr(p, "needs", None) is None for p in pats):
                self._needs = None
            else:
                plain = {n for p in pats if not p.fold for n in p.needs}
                if self.model_path:
                    plain.add("No such file or directory")
                self._needs = (tuple(sorted(plain)), tuple(sorted({n for p in pats if p.fold for n in p.needs})))
        return self._needs
