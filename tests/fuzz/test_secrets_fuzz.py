"""The masking function on generated secrets: whole values hidden whatever they hold; data stays valid JSON."""

from __future__ import annotations

import json
import shlex

from hypothesis import assume, given
from hypothesis import strategies as st

from sparktui.core.config import secrets
from sparktui.core.config.secrets import MASK, mask, mask_data

from .strategies import budget

# Secret values as people paste them: any printable text, spaces and quotes included.
VALUES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=6, max_size=40).filter(
    lambda v: v.strip() == v and MASK not in v
)


@budget(200)
@given(
    VALUES,
    st.sampled_from(["HF_TOKEN", "API_KEY", "DB_PASSWORD", "MY_SECRET"]),
    st.sampled_from(["--api-key", "--hf-token", "--admin-api-key"]),
    st.booleans(),
)
def test_shell_lines_lose_every_secret_value(value, name, flag, joined):
    secrets.forget()  # masked by name and syntax alone, not by remembering the value

    def line(v: str) -> str:
        words = ["docker", "exec", "-e", f"{name}={v}", "c", "serve", "--port", "8000"]
        return shlex.join(words + ([f"{flag}={v}"] if joined else [flag, v]))

    frame = line(MASK)  # what the masked line should read
    assume(value not in frame and shlex.quote(value) not in frame)  # else no masking could tell them apart
    out = mask(line(value))
    assert shlex.split(out) == shlex.split(frame)  # every secret word masked whole, nothing else touched
    assert value not in out and shlex.quote(value) not in out
    assert "--port 8000" in out  # nothing else is hidden


@budget(150)
@given(VALUES, st.text(max_size=60), st.text(max_size=60))
def test_remembered_values_vanish_from_any_text(value, before, after):
    secrets.forget()
    secrets.add_values([value])
    try:
        text = before + value + after
        assert value not in mask(text)
    finally:
        secrets.forget()


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=12), kids, max_size=4)),
    max_leaves=15,
)


@budget(150)
@given(JSONISH, VALUES)
def test_structured_data_stays_json_and_loses_the_secret(data, value):
    secrets.forget()
    doc = {"options": {"env": {"HF_TOKEN": value}, "extra_args": ["--api-key", value]}, "other": data}
    out = json.loads(json.dumps(mask_data(doc)))
    assert out["options"]["env"]["HF_TOKEN"] == MASK and out["options"]["extra_args"] == ["--api-key", MASK]
    assert value not in json.dumps(out["options"])
