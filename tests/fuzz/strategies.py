"""Shared pieces of the fuzz tier: a fixed-seed budget and hostile edits of real samples.

Hypothesis runs without its pytest plugin (pyproject disables it), through @given and @settings only;
derandomize=True makes every run draw the same examples, so CI failures reproduce.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st


def budget(examples: int) -> settings:
    """Same examples every run, no example database, no per-example deadline (a shared 2-core machine)."""
    return settings(
        max_examples=examples, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )


# Pieces that broke parsers before, or are known to break YAML readers and line parsers.
HOSTILE = [
    "!!int abc",
    "!!int ''",
    "!!float ''",
    "!!float abc",
    "!!binary aGk=",
    "!!python/object:os.system x",
    "!!timestamp 2001-12-14",
    "!!set {a, b}",
    "9" * 5000,
    "1" + "0" * 400,
    "1e400",
    "-1e400",
    ".inf",
    "-.inf",
    ".nan",
    "0x1F",
    "0o17",
    "1_000",
    "~",
    "null",
    "true",
    "",
    "''",
    '""',
    "&a [*a, *a]",
    "*a",
    "*nope",
    "<<: *x",
    "[" * 60,
    "{" * 60,
    "]",
    "}",
    ": ",
    "- ",
    "? ",
    "|",
    ">",
    "#",
    "%YAML 1.1\n---\n",
    "---\n",
    "...\n",
    "\x00",
    "\x01",
    "\x7f",
    "\x85",
    "\u202e",
    "\u2066",
    "\ufeff",
    "😀",
    "spark1..lan",
    "a" * 64 + ".lan",
    "\t",
    "\r\n",
    "\r",
    "\n  \n",
    "'",
    '"',
    "\\",
    "$(id)",
    "`id`",
    "; rm -rf /",
    "--api-key",
    "=",
    "x" * 5000,
    "-1",
    "0",
    "65536",
    "2147483648",
    "@@sparktui:rc x 1@@",
    "@@sparktui:done@@",
    "\ufffd",
]


@st.composite
def mutated(draw, seed: str, edits: int = 6) -> str:
    """seed with a few edits: hostile pieces or random text inserted, spans cut, doubled or swapped."""
    text = seed
    for _ in range(draw(st.integers(1, edits))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 200)))
        op = draw(st.sampled_from(["insert", "replace", "cut", "double", "random"]))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(HOSTILE)) + text[i:]
        elif op == "replace":
            text = text[:i] + draw(st.sampled_from(HOSTILE)) + text[j:]
        elif op == "cut":
            text = text[:i] + text[j:]
        elif op == "double":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + draw(st.text(max_size=40)) + text[j:]
    return text


def scalars() -> st.SearchStrategy:
    """Python values a YAML dump turns into every kind of scalar and small structure."""
    leaf = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=80), st.sampled_from(HOSTILE)
    )
    return st.recursive(
        leaf,
        lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=10), kids, max_size=4)),
        max_leaves=12,
    )


def bounded(examples: int, seconds: float = 5) -> settings:
    """budget() with a deadline far above a real example's milliseconds: work proportional to a number
    in the file (a loop over 10**10 layers) fails here instead of running for hours."""
    from datetime import timedelta

    return settings(budget(examples), deadline=timedelta(seconds=seconds))


# What data from elsewhere carried into sparktui's readers before: far numbers, Rich markup, deep nesting.
FAR = [1e300, -1e300, -1e18, 1e18, 10**10, 10**30, -(10**30), 2**63, -1, 0, 5e-324]
MARKUP = ["[/x]", "[bold]", "[/]", "[link=x]", "\\[", "[red]x[/blue]", "[[/x]]"]


def nested(depth: int) -> object:
    v: object = 1
    for i in range(depth):
        v = [v] if i % 2 else {"a": v}
    return v


def hostile_values() -> st.SearchStrategy:
    """Any JSON value, weighted towards the shapes that broke readers: far numbers, markup, deep nesting."""
    return st.one_of(st.sampled_from(FAR), st.sampled_from(MARKUP), st.integers(2, 400).map(nested), scalars())


def deep_text() -> st.SearchStrategy:
    """JSON text nested deeper than any parser recurses, sometimes cut off."""
    return st.builds(
        lambda n, kind, cut: (kind[0] * n + "1" + kind[1] * n)[: None if not cut else n + cut],
        st.integers(50, 200_000),
        st.sampled_from(["[]", ('{"a":', "}")]),
        st.integers(0, 5),
    )
