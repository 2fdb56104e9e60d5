"""The recipe reader on generated input: a Recipe or a RecipeError; what it yields plans without a traceback."""

from __future__ import annotations

import copy

import yaml
from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.recipes.recipe import RecipeError, apply_recipe, parse_recipe

from ..unit.test_plan import MODEL, cluster
from ..unit.test_recipe import SGLANG_RECIPE
from .strategies import budget, mutated, scalars

BASE = yaml.safe_load(SGLANG_RECIPE)
KEYS = sorted(
    set(BASE)
    | {
        "runtime",
        "container",
        "env",
        "min_nodes",
        "max_nodes",
        "mode",
        "solo_only",
        "cluster_only",
        "metadata",
        "recipe_version",
    }
)
DEFAULTS = sorted(
    set(BASE.get("defaults", {}))
    | {"port", "tensor_parallel", "pipeline_parallel", "gpu_memory_utilization", "max_model_len", "served_model_name"}
)
CLUSTER = cluster(2)


def _use(text: str) -> None:
    try:
        r = parse_recipe(text, "r.yaml", environ={"HF_TOKEN": "hf_x"})
    except RecipeError as e:
        assert str(e).startswith("r.yaml") and len(str(e)) < 1200, str(e)[:200]
        return
    for engine_given in (False, True):
        opts, _ = apply_recipe(r, PlanOptions(), MODEL, nodes=2, engine_given=engine_given)
        config, facts, subnets = CLUSTER
        make_plan(config, facts, subnets, opts)  # errors and warnings, never an exception


@budget(100)
@given(st.text(max_size=2000))
def test_any_text(text):
    _use(text)


@budget(200)
@given(mutated(SGLANG_RECIPE))
def test_a_real_recipe_edited(text):
    _use(text)


@budget(150)
@given(
    st.dictionaries(st.sampled_from(KEYS), scalars(), max_size=4),
    st.dictionaries(st.sampled_from(DEFAULTS), scalars(), max_size=4),
)
def test_any_field_set_to_anything(top, defaults):
    doc = copy.deepcopy(BASE)
    doc.update(top)
    if isinstance(doc.get("defaults"), dict):
        doc["defaults"].update(defaults)
    _use(yaml.safe_dump(doc, allow_unicode=True))
