"""Every state-file loader on damaged and mistyped files: the answer is a value every reader can use, or a
StateFileError (one line naming the file); never another exception, never a number JSON cannot carry."""

from __future__ import annotations

import io
import json
import math
import time
from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.state import statefile
from sparktui.core.deploy.options import pivot_options
from sparktui.core.deploy.record import Record, options_to_json
from sparktui.core.plan.image import PACKAGES, parse_inspection
from sparktui.core.state.journal import _lines_backwards, tail_journal
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.state.statefile import StateFileError
from sparktui.core.transfers.state import Unreadable, parse_listing

from ..unit.test_deploy_parts import two_node_plan
from ..unit.test_image_inspect import M, out
from ..unit.test_transfer_state import META
from .strategies import budget, mutated, scalars

JOURNAL_LINE = json.dumps(
    {
        "node": "spark1",
        "started": 1700000000.5,
        "command": "docker ps",
        "exit_status": 0,
        "duration": 0.2,
        "error": None,
        "cluster": "lab",
    }
)
RECORD = Record.from_plan(
    two_node_plan("sglang", None), PlanOptions(engine="sglang", env={"A": "b"}, extra_args=["--x"])
).to_json()


def _finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _changed(base: dict, draw_changes: dict, drop: list[str]) -> dict:
    d = {**base, **draw_changes}
    for k in drop:
        d.pop(k, None)
    return d


@budget(200)
@given(st.text(max_size=400) | mutated('{"a": [1, 2.5, "x", null, true, {"b": 1e10}]}', edits=8))
def test_parse_json_gives_finite_json_or_its_own_error(text):
    try:
        value = statefile.parse_json(text, "F", "fix")
    except StateFileError as e:
        assert "\n" not in e.line() and e.line().startswith("F: ")
        return
    assert _finite(value)
    json.dumps(value, allow_nan=False)


@budget(120)
@given(
    st.lists(
        mutated(JOURNAL_LINE, edits=4)
        | st.builds(
            json.dumps,
            st.dictionaries(
                st.sampled_from(["node", "started", "command", "exit_status", "duration", "error", "cluster", "x"]),
                scalars(),
                max_size=8,
            ),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(1, 8),
    st.sampled_from([None, "lab"]),
)
def test_journal_lines_of_any_shape(tmp_path_factory, lines, limit, cluster):
    path = tmp_path_factory.mktemp("j") / "journal.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="replace")  # lone surrogates drawn
    tail = tail_journal(path, limit, cluster)
    assert len(tail.entries) <= limit
    for e in tail.entries:
        assert isinstance(e.node, str) and isinstance(e.command, str) and (cluster is None or e.cluster == cluster)
        time.localtime(e.started)  # every entry can be shown
        json.dumps(asdict(e), allow_nan=False)
        f"{e.duration:.1f}" if e.duration is not None else ""  # noqa: B018
    if tail.skipped:
        assert "\n" not in tail.warning() and str(path) in tail.warning()


@budget(150)
@given(
    st.dictionaries(st.sampled_from(sorted(RECORD)), scalars(), max_size=4),
    st.dictionaries(st.sampled_from(sorted(RECORD["options"])), scalars(), max_size=4),
    st.lists(st.sampled_from(sorted(RECORD)), max_size=3),
)
def test_deployment_record_of_any_types(changes, option_changes, drop):
    d = _changed(RECORD, changes, drop)
    if isinstance(d.get("options"), dict) and "options" not in changes:
        d["options"] = {**d["options"], **option_changes}
    try:
        rec = Record.from_json(d, "n1:~/rec.json")
    except StateFileError as e:
        assert e.line().startswith("n1:~/rec.json") and "\n" not in e.line()
        return
    json.dumps(options_to_json(rec.options), allow_nan=False)
    for to in ("sglang", "vllm"):
        pivot_options(rec.options, to, rec)  # what pivot does with a record read back


@budget(150)
@given(
    st.dictionaries(st.sampled_from(sorted(META.to_json())), scalars(), max_size=4),
    st.lists(st.sampled_from(sorted(META.to_json())), max_size=3),
    mutated('{"ok": true, "message": "verified: 6 files"}', edits=3),
)
def test_transfer_meta_of_any_types(changes, drop, verified):
    meta = json.dumps(_changed(META.to_json(), changes, drop), allow_nan=True)
    text = (
        f"@@ {META.id} rc=0 alive=0 cancelled=0 now=2000\nmeta={meta}\nverified={verified}\ncount=\ntail=\n"
        f"@@ other rc= alive=1 cancelled=0 now=1\nmeta={json.dumps(META.to_json())}\nverified=\ncount=\ntail=\n"
    )
    problems: list[Unreadable] = []
    recs = parse_listing(text, "n1", problems)
    assert len(recs) + len(problems) == 2  # the good one is always there, the other listed or named
    for r in recs:
        json.dumps(r.to_dict(), allow_nan=False, default=str)
        r.message()
    for p in problems:
        assert "\n" not in p.problem and p.problem.startswith("n1:~/")


@budget(150)
@given(st.dictionaries(st.sampled_from([*PACKAGES, "x"]), scalars(), max_size=4) | scalars())
def test_release_cache_of_any_shape(cache):
    info = parse_inspection("img", "spark1", out(f"{M}cached\n{json.dumps(cache, allow_nan=True)}\n"))
    assert all(v is None or isinstance(v, str) for v in info.versions.values())
    assert (info.problem is None) == bool(info.versions)
    if info.problem:
        assert "\n" not in info.problem


@budget(300)
@given(
    st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    st.booleans(),
    st.integers(1, 9),
    st.integers(1, 40),
)
def test_reading_backwards_in_blocks_gives_every_line_once(lines, trailing_newline, block, max_line):
    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    got = [x for x in _lines_backwards(io.BytesIO(data), block, max_line) if x != b""]
    whole = data.split(b"\n")
    want = [None if len(x) > max_line else x for x in reversed(whole) if x != b""]
    assert got == want  # the same lines, last first, an overlong one as None, whatever the block size
