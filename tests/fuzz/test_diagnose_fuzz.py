"""Diagnosis on damaged engine logs: lines of any content, in any order, never raise, and the result is JSON."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.diagnosis.diagnose import Diagnoser

from .strategies import budget, mutated

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "unit" / "transcripts"
SGLANG = (TRANSCRIPTS / "sglang_hang_cut.log").read_text()
VLLM = (TRANSCRIPTS / "vllm_native_ready.log").read_text()


def _run(engine: str, text: str) -> None:
    clock = iter(range(1, 1 << 30))
    d = Diagnoser(engine, hang_after=5, model_path="/models/m", clock=lambda: float(next(clock)))
    for line in text.splitlines():
        d.feed(line, node="n1")
    json.dumps(d.to_json())


@budget(60)
@given(st.sampled_from(["sglang", "vllm"]), mutated(SGLANG, edits=10))
def test_sglang_log_damaged(engine, text):
    _run(engine, text)


@budget(60)
@given(st.sampled_from(["sglang", "vllm"]), mutated(VLLM, edits=10))
def test_vllm_log_damaged(engine, text):
    _run(engine, text)


@budget(60)
@given(st.sampled_from(["sglang", "vllm"]), st.text(max_size=2000))
def test_any_text(engine, text):
    _run(engine, text)
