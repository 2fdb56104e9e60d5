"""Compiled patterns that skip the regex engine on text that cannot match.

Every match of r"Loading \\w+ checkpoint shards" contains "checkpoint shards"; a substring test for
it costs a fraction of a regex search, and a log line passes dozens of signatures, nearly all of
which it does not contain. The literal text is read from the pattern itself (its parse tree), so the
signature tables stay plain regular expressions.
"""

from __future__ import annotations

import re
from re import _constants as C
from re import _parser

MIN_NEED = 3  # shorter literals are too common to rule anything out


def needs(pattern: re.Pattern) -> tuple[str, ...] | None:
    """Texts of which every match contains at least one (lower-case for a case-blind pattern);
    None when the pattern has no such literal."""
    try:
        tree = _parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - an exotic pattern is simply not prefiltered
        return None
    fold = bool(pattern.flags & re.IGNORECASE)
    found = _needs(list(tree), fold)
    return tuple(n.lower() for n in found) if found and fold else found


def _needs(items: list, fold: bool) -> tuple[str, ...] | None:
    """For a sequence: its longest run of literal characters, or else the needs of one of its
    mandatory parts (a group, or an alternation whose every branch has some)."""
    best: tuple[str, ...] | None = None
    run: list[str] = []

    def better(cand: tuple[str, ...] | None) -> None:
        nonlocal best
        if cand and min(map(len, cand)) >= MIN_NEED and (best is None or min(map(len, cand)) > min(map(len, best))):
            best = cand

    for op, av in [*items, (None, None)]:
        if op is C.LITERAL and (not fold or av < 128):
            run.append(chr(av))
            continue
        better(("".join(run),) if run else None)
        run = []
        if op is C.BRANCH:
            alts = [_needs(list(b), fold) for b in av[1]]
            if all(alts):
                better(tuple(n for a in alts for n in a))
        elif op is C.SUBPATTERN:
            _, add, remove, sub = av
            if not (add | remove) & re.IGNORECASE:  # a scoped case flag changes what its literals match
                better(_needs(list(sub), fold))
        elif op is C.MAX_REPEAT or op is C.MIN_REPEAT:
            low, _, sub = av
            if low >= 1:
                better(_needs(list(sub), fold))
    return best


class Quick:
    """A compiled pattern with a substring prefilter in front of search() and match(); everything
    else is the pattern's own."""

    __slots__ = ("regex", "needs", "fold")

    def __init__(self, regex: re.Pattern) -> None:
        self.regex = regex
        self.needs = needs(regex)
        self.fold = bool(regex.flags & re.IGNORECASE)

    def _may(self, text: str) -> bool:
        if self.fold:
            if not text.isascii():  # case-blind matching of other scripts is the regex engine's business
                return True
            text = text.lower()
        for n in self.needs:
            if n in text:
                return True
        return False

    def search(self, text: str, *args):
        if self.needs is not None and not args and not self._may(text):
            return None
        return self.regex.search(text, *args)

    def match(self, text: str, *args):
        if self.needs is not None and not args and not self._may(text):
            return None
        return self.regex.match(text, *args)

    def __getattr__(self, name: str):
        return getattr(self.regex, name)

    def __repr__(self) -> str:
        return f"Quick({self.regex.pattern!r}, needs={self.needs!r})"


def compile(pattern: str, flags: int = 0) -> Quick:  # noqa: A001 - the re.compile of this module
    return Quick(re.compile(pattern, flags))
