"""The config loader on generated input: a Config or a ConfigError at FILE:LINE:COL, never a traceback."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.config.config import ConfigError, load_config_text

from .strategies import budget, mutated, scalars

EXAMPLE = (Path(__file__).resolve().parents[2] / "config.example.yaml").read_text()
BASE = yaml.safe_load(EXAMPLE)
WHERE = re.compile(r"f\.yaml(:\d+:\d+)?: ")


def _load(text: str) -> None:
    try:
        load_config_text(text, "f.yaml")
    except ConfigError as e:
        msg = str(e)
        assert WHERE.match(msg), msg[:200]
        assert len(msg) < 1200, msg[:200]  # bad values are shortened, never echoed whole


@budget(150)
@given(st.text(max_size=3000))
def test_any_text(text):
    _load(text)


@budget(200)
@given(mutated(EXAMPLE))
def test_the_example_edited(text):
    _load(text)


def _paths(d, prefix=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


PATHS = sorted(_paths(BASE), key=str)


@budget(200)
@given(st.lists(st.tuples(st.sampled_from(PATHS), scalars()), min_size=1, max_size=3))
def test_any_field_set_to_anything(changes):
    doc = copy.deepcopy(BASE)
    for path, value in changes:
        node = doc
        try:
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced the parent
    _load(yaml.safe_dump(doc, allow_unicode=True))
