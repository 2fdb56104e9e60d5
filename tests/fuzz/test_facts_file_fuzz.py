"""The facts files `plan --facts` and `plan --offline` read: damaged text, and a valid document with any
field swapped for any value, give facts or a FactsFileError, never another exception."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.nodes import facts_store
from sparktui.core.nodes.inventory import Inventory, analyse
from sparktui.core.plan.plan import PlanOptions, make_plan

from ..unit.test_plan import cluster
from .strategies import budget, mutated, scalars

_, FACTS, SUBNETS = cluster(2)
CHECK_JSON = json.dumps({**Inventory(facts=FACTS, subnets=SUBNETS).to_json(), "requirements": []})
NAMES, HOSTS = list(FACTS), {n: f.host for n, f in FACTS.items()}


def _paths(doc, prefix=()):
    """Every (path) into a JSON document, for swapping one value."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


PATHS = [p for p in _paths(json.loads(CHECK_JSON)) if p]


def _load(tmp, text: str) -> None:
    tmp.write_text(text)
    try:
        saved = facts_store.load_file(tmp, NAMES, HOSTS)
    except facts_store.FactsFileError as e:
        assert "\n" not in str(e) and str(tmp) in str(e)
        return
    assert set(saved.facts) == set(NAMES)
    # and what loaded plans: errors in the plan, never an exception
    config = cluster(2)[0]
    plan = make_plan(config, saved.facts, analyse(config, saved.facts).subnets, PlanOptions())
    assert isinstance(plan.errors, list)


@budget(120)
@given(mutated(CHECK_JSON, edits=8))
def test_a_damaged_check_json(text):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        _load(Path(d) / "f.json", text)


@budget(200)
@given(st.sampled_from(PATHS), scalars())
def test_any_field_of_any_kind(path, value):
    import tempfile
    from pathlib import Path

    doc = json.loads(CHECK_JSON)
    target = doc
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    try:
        text = json.dumps(doc)
    except (ValueError, TypeError):
        return
    with tempfile.TemporaryDirectory() as d:
        _load(Path(d) / "f.json", text)
