"""sparktui's state files with the shapes that broke their readers: far numbers, Rich markup, deep nesting,
wrong kinds and a cut-off last line. Each loader gives values every front can print (with Rich too) or
its own one-line error, and the next append survives a cut-off line, in bounded time."""

from __future__ import annotations

import io
import json
import tempfile
import time
from pathlib import Path
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from sparktui.cli.bench import run_title, table
from sparktui.cli.plan import plan_without_nodes, render_plan
from sparktui.core.nodes import facts_store
from sparktui.core.bench import results
from sparktui.core.deploy.record import Record
from sparktui.core.state.journal import Journal, tail_journal
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.state.statefile import StateFileError
from sparktui.core.transfers.state import Unreadable, parse_listing

from ..unit.test_plan import cluster
from ..unit.test_transfer_state import META
from .strategies import MARKUP, bounded, deep_text, hostile_values, mutated
from .test_statefile_fuzz import JOURNAL_LINE, RECORD

ROW = results.Row(
    deployment="lab",
    engine="vllm",
    image="img:1",
    plan_id="p1",
    concurrency=8,
    ttft_p50_ms=40.5,
    ttft_p99_ms=90.1,
    itl_p50_ms=7.5,
    output_tokens_per_s=900.0,
    requests_per_s=3.5,
    completed=64,
    started=1_790_000_000.0,
)
ROW_JSON = json.dumps(ROW.to_json(), sort_keys=True)


def _shown(*renderables) -> str:
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(*renderables)
    return out.getvalue()


def _lines(base: str, keys: list[str]) -> st.SearchStrategy:
    """A file's lines: damaged copies of a real line, or it with one field swapped for a hostile value."""
    swapped = st.builds(lambda k, v: json.dumps({**json.loads(base), k: v}), st.sampled_from(keys), hostile_values())
    return st.lists(mutated(base, edits=4) | swapped | deep_text(), min_size=1, max_size=6)


def _write(path: Path, lines: list[str], cut: int) -> None:
    text = "\n".join(lines) + "\n"
    path.write_text(text[: len(text) - cut] if cut else text, encoding="utf-8", errors="replace")


@bounded(120)
@given(_lines(ROW_JSON, sorted(ROW.to_json())), st.integers(0, 30))
def test_bench_history_of_any_rows_then_an_append(lines, cut):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.jsonl"
        _write(path, lines, cut)
        results.append([ROW], path)
        rows, problems = results.load(path)
    assert rows and rows[-1] == ROW  # a cut-off line never swallows the row appended after it
    assert len(problems) <= 1 and all("\n" not in p for p in problems)
    for g in results.runs(rows):
        _shown(table(g, run_title(g)))  # what `bench --history` prints
    json.dumps([r.to_json() for r in rows], allow_nan=False)


@bounded(120)
@given(_lines(JOURNAL_LINE, sorted(json.loads(JOURNAL_LINE))), st.integers(0, 30))
def test_journal_of_any_lines_then_an_append(lines, cut):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "journal.jsonl"
        _write(path, lines, cut)
        j = Journal(path)
        j.finish(j.start("spark1", "echo appended"), 0)
        tail = tail_journal(path, 50)
    assert tail.entries[-1].command == "echo appended" and j.problem is None
    for e in tail.entries:
        time.localtime(e.started)
    assert tail.warning() is None or "\n" not in tail.warning()


_, FACTS, _ = cluster(2)


@bounded(100)
@given(hostile_values(), st.sampled_from(MARKUP), st.sampled_from(["taken_at", "host"]))
def test_kept_facts_with_far_times_and_markup_plan_offline(value, markup, field):
    config = cluster(2)[0]
    hosts = {n.name: n.host for n in config.nodes}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.json"
        assert facts_store.remember(config.cluster, hosts, FACTS, path=path) is None
        doc = json.loads(path.read_text())
        node = next(iter(doc["nodes"].values()))
        node[field] = value
        node["facts"]["docker"]["images"][markup] = markup
        node["facts"]["interfaces"][0]["name"] = markup
        try:
            path.write_text(json.dumps(doc))
        except (ValueError, RecursionError):
            return
        try:
            saved = facts_store.load_last(config.cluster, list(hosts), hosts, path)
        except facts_store.FactsFileError as e:
            assert "\n" not in str(e) and str(path) in str(e)
            return
        saved.when()
        with mock.patch.object(facts_store, "load_last", lambda *a, **k: saved):  # what `plan --offline` reads
            _shown(render_plan(plan_without_nodes(config, PlanOptions(), None)))


@bounded(150)
@given(st.dictionaries(st.sampled_from(sorted(RECORD)), hostile_values(), max_size=3))
def test_deployment_record_with_hostile_values(changes):
    try:
        Record.from_json({**RECORD, **changes}, "n1:~/rec.json")
    except StateFileError as e:
        assert e.line().startswith("n1:~/rec.json") and "\n" not in e.line()


@bounded(150)
@given(st.dictionaries(st.sampled_from(sorted(META.to_json())), hostile_values(), max_size=3) | deep_text())
def test_transfer_meta_with_hostile_values(changes):
    try:
        meta = changes if isinstance(changes, str) else json.dumps({**META.to_json(), **changes})
    except (ValueError, RecursionError):
        return
    text = f"@@ {META.id} rc=0 alive=0 cancelled=0 now=2000\nmeta={meta}\nverified=\ncount=\ntail=\n"
    problems: list[Unreadable] = []
    for r in parse_listing(text, "n1", problems):
        json.dumps(r.to_dict(), allow_nan=False, default=str)
        _shown(r.message())
    assert all("\n" not in p.problem for p in problems)
