"""The substring prefilter in front of the log signatures: it may only ever skip lines that cannot match."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.diagnosis import phases, quickre
from sparktui.core.engines import ENGINES, logsigns as S

TESTS = Path(__file__).resolve().parents[1]


def every_signature() -> list[quickre.Quick]:
    found = [v for v in vars(S).values() if isinstance(v, quickre.Quick)]
    found += [s.pattern for s in S.SIGNS] + list(S.PREFIXES)
    for e in ENGINES.values():
        found += [rx for rx in (e.log_rules.dist_begin, e.log_rules.dist_end, e.log_rules.ready) if rx is not None]
        found += [s.pattern for s in e.signs]
    found += [rx for _, rx in phases.phase_signs()] + list(phases.RANK_TAGS)
    found += [phases.NCCL_COMM, phases.NCCL_PID, phases.NODE_TAG]
    assert all(isinstance(q, quickre.Quick) for q in found)
    return found


def test_needs_are_what_every_match_must_contain():
    assert quickre.needs(re.compile(r"Loading \w+ checkpoint shards:\s+(\d+)%")) == (" checkpoint shards:",)
    assert quickre.needs(re.compile(r"(?:GET|POST) /v1/\S+|Decode batch")) == (" /v1/", "Decode batch")
    assert quickre.needs(re.compile(r"Address already in USE", re.I)) == ("address already in use",)
    assert quickre.needs(re.compile(r"(?i:Scheduler) watchdog")) == (" watchdog",)  # not the case-blind part
    assert quickre.needs(re.compile(r"ab|\d+")) is None  # one branch could match with no literal at all
    assert quickre.needs(re.compile(r"(?:abcd)?xy")) is None  # optional text is no need


def test_on_every_recorded_engine_log_the_prefilter_agrees_with_the_pattern():
    lines = {ln for f in TESTS.rglob("*.log") for ln in f.read_text(errors="replace").splitlines()}
    assert len(lines) > 500
    lines |= {ln.upper() for ln in lines} | {ln.lower() for ln in lines}
    for q in every_signature():
        for ln in lines:
            assert bool(q.search(ln)) == bool(q.regex.search(ln)), (q, ln)
            assert bool(q.match(ln)) == bool(q.regex.match(ln)), (q, ln)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_lines_made_of_signature_pieces_are_judged_as_the_pattern_does(data):
    qs = every_signature()
    pieces = sorted({n for q in qs if q.needs for n in q.needs} | {"ß", "\u212a", " ", "0", ": ", "Error"})
    q = data.draw(st.sampled_from(qs))
    line = "".join(data.draw(st.lists(st.one_of(st.sampled_from(pieces), st.text(max_size=4)), max_size=8)))
    assert bool(q.search(line)) == bool(q.regex.search(line))
    assert bool(q.match(line)) == bool(q.regex.match(line))
