"""The simulated engines, driven by clients nobody here wrote: `vllm bench serve` (openai and openai-chat
backends), `python -m sglang.bench_serving` (sglang backend) and the official `openai` client, each from a
release's contract environment, against a simulated engine of that release on 127.0.0.1. Any failed
request, a missing latency figure or /metrics that the release's prometheus_client cannot read fails.

The tokenizer the clients need is trained in the test with `tokenizers` (make_tokenizer.py); nothing
comes from the hub (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.simhelpers import SimProcess, free_port, http, launcher_argv, make_model, module_argv

from .venvs import Release, python_of

HERE = Path(__file__).resolve().parent
MODEL = "sim-model"
PROMPTS = 16
SPEED = 20  # engine seconds per wall second: decode steps stay a few ms of wall time, ITL measurable
MISSING = "No module named "


def python_or_skip(r: Release) -> Path:
    py = python_of(r)
    if py is None:
        pytest.skip(f"contract environment {r.key} is not built: python3 -m tests.contract.venvs")
    return py


def client_env(tmp: Path) -> dict[str, str]:
    """The client's own environment: no simulator shims on the path, no hub, no proxies."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "SPARKTUI_SIM_SPEED") and not k.lower().endswith("_proxy")
    }
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(tmp / "hf"),
        NO_PROXY="127.0.0.1",
        OPENAI_API_KEY="sk-none",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_client(
    r: Release, argv: list[str], tmp: Path, what: str, timeout: float = 600, stdin: str | None = None
) -> str:
    """Run `python ARGV...` in the release's environment; a client that cannot import skips, naming why."""
    py = python_or_skip(r)
    p = subprocess.run(
        [str(py), *argv], env=client_env(tmp), cwd=tmp, capture_output=True, text=True, timeout=timeout, input=stdin
    )
    if p.returncode != 0:
        text = p.stdout[-3000:] + p.stderr[-6000:]
        if MISSING in text and "Traceback" in text:
            missing = text[text.rindex(MISSING) :].splitlines()[0]
            pytest.skip(f"{what} cannot run in {r.key}: {missing} (not installed by tests/contract/venvs.py)")
        pytest.fail(f"{what} ({r.key}) exited {p.returncode}:\n{text}")
    return p.stdout


def tokenizer(r: Release, tmp: Path) -> Path:
    out = tmp / "tokenizer"
    run_client(r, [str(HERE / "make_tokenizer.py"), str(out)], tmp, "building the tokenizer", timeout=300)
    return out


@contextlib.contextmanager
def engine(r: Release, tmp: Path):
    """A simulated engine of release `r` on 127.0.0.1; yields its base URL."""
    model = make_model(tmp / "model", shards=4)
    port = free_port("127.0.0.1")
    common = ["--served-model-name", MODEL, "--host", "127.0.0.1", "--port", str(port)]
    if r.engine == "vllm":
        argv = launcher_argv("vllm", "serve", str(model), *common)
        env, ready = {"SPARKTUI_SIM_VLLM_VERSION": r.version}, "Application startup complete."
    else:
        argv = module_argv("sglang.launch_server", "--model-path", str(model), *common, "--enable-metrics")
        env, ready = {"SPARKTUI_SIM_SGLANG_VERSION": r.version}, "The server is fired up and ready to roll!"
    with SimProcess(argv, speed=SPEED, extra_env=env) as sim:
        sim.wait_for(ready, timeout=120)
        yield f"http://127.0.0.1:{port}"


def check_metrics(r: Release, base: str, tmp: Path, names: dict[str, str]) -> dict:
    """/metrics read by the release's own prometheus_client; `names`: family -> type it must have."""
    status, body = http("GET", f"{base}/metrics")
    assert status == 200, body[:500]
    fams = json.loads(
        run_client(r, [str(HERE / "metrics_parse.py")], tmp, "prometheus_client's parser", stdin=body.decode())
    )
    for name, kind in names.items():
        assert name in fams and fams[name][0] == kind, (name, fams.get(name))
    return fams


def check_openai(r: Release, base: str, tmp: Path) -> None:
    seen = json.loads(run_client(r, [str(HERE / "openai_client.py"), base, MODEL], tmp, "the openai client"))
    assert seen["models"] == [MODEL]
    assert "42" in seen["chat"]["text"] and seen["chat"]["finish"] == "stop"
    assert "42" in seen["chat_stream"]["text"] and seen["chat_stream"]["finish"] == ["stop"]
    assert seen["chat_stream"]["usage"]["completion_tokens"] == seen["chat"]["usage"]["completion_tokens"]
    assert seen["completion"]["finish"] == "length" and seen["completion"]["usage"]["completion_tokens"] == 12
    assert seen["completion_stream"]["text"] == seen["completion"]["text"]
    assert seen["completion_stream"]["usage"]["completion_tokens"] == 12
    if r.engine == "vllm":  # SGLang answers any model name with its own
        assert seen["unknown_model"]["status"] == 404


def vllm_bench(r: Release, base: str, tok: Path, tmp: Path, backend: str, endpoint: str) -> dict:
    name = f"{backend}.json"
    run_client(
        r,
        [
            str(HERE / "vllm_bench.py"),
            "serve",
            "--backend",
            backend,
            "--base-url",
            base,
            "--endpoint",
            endpoint,
            "--model",
            MODEL,
            "--tokenizer",
            str(tok),
            "--dataset-name",
            "random",
            "--random-input-len",
            "48",
            "--random-output-len",
            "24",
            "--num-prompts",
            str(PROMPTS),
            "--seed",
            "1",
            "--save-result",
            "--save-detailed",
            "--result-dir",
            str(tmp),
            "--result-filename",
            name,
        ],
        tmp,
        f"vllm bench serve --backend {backend}",
    )
    result = json.loads((tmp / name).read_text())
    errors = [e for e in result.get("errors", []) if e]
    assert result["completed"] == PROMPTS and not result.get("failed"), errors[:3]
    for figure in ("median_ttft_ms", "median_itl_ms", "median_tpot_ms"):
        assert result.get(figure, 0) > 0, (figure, result.get(figure))
    return result


def test_vllm_clients_against_the_simulated_vllm(vllm_release, tmp_path):
    r = vllm_release
    python_or_skip(r)
    tok = tokenizer(r, tmp_path)
    with engine(r, tmp_path) as base:
        # three clients of their own, side by side (each is seconds of imports); /metrics after all of them
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            runs = [
                pool.submit(vllm_bench, r, base, tok, tmp_path, "openai", "/v1/completions"),
                pool.submit(vllm_bench, r, base, tok, tmp_path, "openai-chat", "/v1/chat/completions"),
                pool.submit(check_openai, r, base, tmp_path),
            ]
            completions, chat, _ = [run.result() for run in runs]  # a skip or failure in one is raised here
        fams = check_metrics(
            r,
            base,
            tmp_path,
            {
                "vllm:generation_tokens": "counter",
                "vllm:prompt_tokens": "counter",
                "vllm:num_requests_running": "gauge",
                "vllm:kv_cache_usage_perc": "gauge",
                "vllm:time_to_first_token_seconds": "histogram",
                "vllm:inter_token_latency_seconds": "histogram",
            },
        )
    served = completions["total_output_tokens"] + chat["total_output_tokens"]
    assert fams["vllm:generation_tokens"][1]["vllm:generation_tokens_total"] >= served
    assert fams["vllm:time_to_first_token_seconds"][1]["vllm:time_to_first_token_seconds_count"] >= 2 * PROMPTS


def test_sglang_clients_against_the_simulated_sglang(sglang_release, tmp_path):
    r = sglang_release
    python_or_skip(r)
    tok = tokenizer(r, tmp_path)
    out = tmp_path / "sglang.jsonl"
    names = {
        "sglang:generation_tokens": "counter",
        "sglang:num_running_reqs": "gauge",
        "sglang:token_usage": "gauge",
        "sglang:time_to_first_token_seconds": "histogram",
        "sglang:inter_token_latency_seconds": "histogram",
    }
    with engine(r, tmp_path) as base:
        check_openai(r, base, tmp_path)  # first: a benchmark client that cannot import skips the rest
        check_metrics(r, base, tmp_path, names)
        # SGLang 0.5.23's bench_serving imports torchvision (sglang/srt/configs -> multimodal/internvl_utils.py),
        # which has no build for the contract tier's CPU torch: that release skips here, naming it
        run_client(
            r,
            [
                "-m",
                "sglang.bench_serving",
                "--backend",
                "sglang",
                "--base-url",
                base,
                "--model",
                MODEL,
                "--tokenizer",
                str(tok),
                "--dataset-name",
                "random-ids",
                "--random-input-len",
                "48",
                "--random-output-len",
                "24",
                "--random-range-ratio",
                "1",
                "--num-prompts",
                str(PROMPTS),
                "--seed",
                "1",
                "--output-file",
                str(out),
            ],
            tmp_path,
            "sglang.bench_serving --backend sglang",
        )
        fams = check_metrics(r, base, tmp_path, names)
    result = json.loads(out.read_text().splitlines()[-1])
    assert result["completed"] == PROMPTS, result
    for figure in ("median_ttft_ms", "median_itl_ms"):
        assert result.get(figure, 0) > 0, (figure, result.get(figure))
    assert sum(fams["sglang:generation_tokens"][1].values()) >= result["total_output_tokens"]


SOURCES = {
    "vllm": ["vllm/v1/metrics/loggers.py"],
    "sglang": ["sglang/srt/observability/metrics_collector.py", "sglang/srt/metrics/collector.py"],
}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_simulator_s_metric_names_and_help_are_the_release_s(engine, request):
    """Every metric the simulator serves for a release is registered, with that help text, in its source."""
    from sparktui.sim.metrics_catalog import catalog

    from .conftest import releases

    checked = 0
    for r in releases(engine):
        py = python_of(r)
        if py is None:
            continue
        site = next((py.parent.parent / "lib").glob("python3*/site-packages"))
        src = next((site / p for p in SOURCES[engine] if (site / p).exists()), None)
        assert src is not None, f"{r.key}: none of {SOURCES[engine]} in {site}"
        text = src.read_text()
        flat = re.sub(r'"\s*\n\s*"', "", text)  # help texts split over lines join up
        for spec in catalog(engine, r.version)[0]:
            assert f'name="{spec.name}"' in text, f"{r.key}: {spec.name} is not in {src}"
            assert spec.help in flat, f"{r.key}: {spec.name}'s help differs from {src}"
        checked += 1
    if not checked:
        pytest.skip(f"no {engine} contract environment is built: python3 -m tests.contract.venvs")
