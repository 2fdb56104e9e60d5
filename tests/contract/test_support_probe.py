"""The support check's probe program (core/plan/support.py + the engine's support_probe) run by the real vLLM and
SGLang of every release in the matrix: it must name a supported architecture supported and one the release
lacks unsupported. Qwen3.5 (Qwen3_5MoeForConditionalGeneration, model type qwen3_5_moe) is the seed's case:
SGLang 0.5.3.post3 (lmsysorg/sglang:spark) and vLLM 0.11.0 lack it; SGLang 0.5.23 and vLLM 0.31.0/0.33.0
list it. A made-up architecture is unsupported everywhere."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess

import pytest

from sparktui.core.plan.support import _JSON, Support, classify, probe_program

from .conftest import releases
from .venvs import Release, python_of

pytestmark = pytest.mark.contract

QWEN35 = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}
QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "vocab_size": 151936,
}
MADE_UP = {"architectures": ["SparktuiNoSuchForCausalLM"], "model_type": "sparktui_no_such"}
LACKS_QWEN35 = {("sglang", "0.5.3.post3"), ("vllm", "0.11.0")}


def answer(r: Release, cfg: dict, tmp_path, name: str = "model") -> Support:
    py = python_of(r)
    if py is None:
        pytest.skip(f"contract environment {r.key} is not built: python3 -m tests.contract.venvs")
    model = tmp_path / name
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(cfg))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run(
        [str(py), "-c", probe_program(r.engine), str(model), r.engine],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    line = [x for x in p.stdout.splitlines() if x.startswith(_JSON)][-1]
    s = Support(engine=r.engine, image=f"{r.engine}:{r.version}", model_path=str(model), node="contract")
    return classify(s, json.loads(line[len(_JSON) :]))


def asked() -> list[tuple[dict, str]]:
    return [(QWEN3_MOE, "qwen3-moe"), (MADE_UP, "made-up"), (QWEN35, "qwen3.5")]


@pytest.mark.parametrize("r", releases("vllm") + releases("sglang"), ids=lambda r: r.key)
def test_probe_answers_right_for_each_release(r, tmp_path):
    if python_of(r) is None:
        pytest.skip(f"contract environment {r.key} is not built: python3 -m tests.contract.venvs")
    # three probes of their own, side by side (each imports the release, seconds), each its own model directory
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        runs = [pool.submit(answer, r, cfg, tmp_path, name) for cfg, name in asked()]
        known, made_up, s = [run.result() for run in runs]  # s: Qwen3.5's
    assert known.status == "supported", known.line()
    assert known.engine_version == r.version
    assert made_up.status == "unsupported", made_up.line()
    assert "SparktuiNoSuchForCausalLM" in made_up.reason and made_up.fix
    if (r.engine, r.version) in LACKS_QWEN35:
        assert s.status == "unsupported", s.line()
        assert "Qwen3_5MoeForConditionalGeneration" in s.reason and r.version in s.reason
    else:
        assert s.status == "supported", s.line()
        assert s.quant_method == "fp8"


@pytest.mark.parametrize("r", releases("vllm")[:1] + releases("sglang")[:1], ids=lambda r: r.key)
def test_probe_without_a_readable_config_cannot_check(r, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{not json")
    py = python_of(r)
    if py is None:
        pytest.skip(f"contract environment {r.key} is not built: python3 -m tests.contract.venvs")
    p = subprocess.run(
        [str(py), "-c", probe_program(r.engine), str(tmp_path / "model"), r.engine],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    line = [x for x in p.stdout.splitlines() if x.startswith(_JSON)][-1]
    s = classify(Support(engine=r.engine, image="i", model_path="m"), json.loads(line[len(_JSON) :]))
    assert s.status == "unknown" and "does not parse" in s.reason
