"""The simulator image's `vllm bench serve` against the simulated vLLM: it really sends the workload and
writes the real client's result (same keys as the real vLLM 0.31.0 client's, tests/unit/samples/bench/),
figures measured from the stream, which sparktui's reader turns into a row."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from sparktui.core.bench import client, results
from sparktui.sim import sim_env
from tests.simhelpers import SimProcess, free_port, launcher_argv, make_model

SAMPLES = Path(__file__).resolve().parents[1] / "unit" / "samples" / "bench"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = str(make_model(tmp_path_factory.mktemp("m") / "qwen", shards=2))
    port = free_port()
    proc = SimProcess(
        launcher_argv("vllm", "serve", model, "--port", str(port), "--served-model-name", "sim-model"), speed=50
    ).start()
    try:
        proc.wait_for("Application startup complete.", timeout=120)
        yield port, model
    finally:
        proc.terminate()


def bench(tmp_path, port, model, c, n, input_len=24, output_len=12):
    w = client.Workload([c], input_len=input_len, output_len=output_len, prompts_per_slot=2)
    argv = launcher_argv("vllm") + client.bench_args(port, "sim-model", model, w, c)
    argv = [a.replace("__DIR__", str(tmp_path)) for a in argv]
    i = argv.index("--num-prompts")
    argv[i + 1] = str(n)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=sim_env(None))


def test_the_simulated_client_writes_the_real_clients_result_from_measured_figures(server, tmp_path):
    port, model = server
    ran = bench(tmp_path, port, model, c=4, n=8)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    doc = json.loads((tmp_path / "c4.json").read_text())
    real = json.loads((SAMPLES / "vllm-c1.json").read_text())
    assert set(doc) == set(real)  # the same keys as the real client's --save-result
    assert doc["completed"] == 8 and doc["failed"] == 0 and doc["max_concurrency"] == 4
    assert doc["total_output_tokens"] == 8 * 12  # --ignore-eos: exactly --random-output-len each, from usage
    assert doc["total_input_tokens"] == 8 * 24  # four-character words: one token each as the simulator counts
    assert 0 < doc["median_ttft_ms"] <= doc["p99_ttft_ms"] and doc["median_itl_ms"] > 0
    assert doc["duration"] > 0 and abs(doc["request_throughput"] - 8 / doc["duration"]) < 1e-6
    assert 1 < doc["max_concurrent_requests"] <= 8 and len(doc["latencies"]) == 8
    # tqdm's bar as sparktui follows it, and the summary table
    p = client.progress(client.MARK + "4\n" + ran.stderr)
    assert (p.concurrency, p.done, p.total) == (4, 8, 8)
    assert "Successful requests:                     8" in ran.stdout
    row = results.from_client(json.dumps(doc), "c4.json", deployment="d", engine="vllm", image="", plan_id="p")
    assert (row.concurrency, row.completed) == (4, 8) and row.ttft_p50_ms == doc["median_ttft_ms"]


def test_concurrency_shows_in_the_figures(server, tmp_path):
    port, model = server
    one = bench(tmp_path, port, model, c=1, n=8)
    four = bench(tmp_path, port, model, c=4, n=8)
    assert one.returncode == 0 and four.returncode == 0, one.stderr + four.stderr
    d1, d4 = (json.loads((tmp_path / f"c{c}.json").read_text()) for c in (1, 4))
    assert sum(d1["latencies"]) <= d1["duration"]  # one at a time: the requests never overlap
    assert sum(d4["latencies"]) > d4["duration"]  # four at once: they do
    assert d4["request_throughput"] > d1["request_throughput"]  # the simulator batches concurrent requests


def test_unknown_options_are_refused_in_argparses_words(tmp_path):
    ran = subprocess.run(
        launcher_argv("vllm", "bench", "serve", "--model", "m", "--no-such-flag"),
        capture_output=True,
        text=True,
        timeout=60,
        env=sim_env(None),
    )
    assert ran.returncode == 2 and "error: unrecognized arguments: --no-such-flag" in ran.stderr


def test_an_unreachable_endpoint_fails_with_the_error_and_no_completed_request(tmp_path):
    port = free_port()  # nothing listens there
    ran = bench(tmp_path, port, "/m", c=1, n=2)
    assert ran.returncode != 0
    doc = json.loads((tmp_path / "c1.json").read_text())
    assert doc["completed"] == 0 and doc["failed"] == 2
    assert "Cannot connect to host 127.0.0.1" in ran.stdout


def test_the_start_script_hands_the_key_to_the_client_and_leaves_it_nowhere(tmp_path):
    """The endpoint's key comes on stdin, reaches the client as OPENAI_API_KEY (what the real client sends as a
    bearer token), and is on no command line, in no file once read, and in no log."""
    key = "sk-bench-ＫＥＹ-1"
    text = client.start(
        "b1", 'printf "%s" "$OPENAI_API_KEY" > seen; tr "\\0" " " < /proc/$$/cmdline > cmdline', key_on_stdin=True
    )
    assert key not in text
    home = tmp_path / "home"
    home.mkdir()
    r = subprocess.run(
        ["sh", "-c", text],
        input=key,
        capture_output=True,
        text=True,
        timeout=30,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    d = home / client.STATE_ROOT / "b1"
    deadline = time.monotonic() + 20
    while not (d / "rc").exists():  # the job runs detached: its exit status, written last, is its end
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.05)
    assert (d / "rc").read_text().strip() == "0"
    assert (d / "seen").read_text() == key
    assert key not in (d / "cmdline").read_text() and key not in (d / "log").read_text()
    assert not (d / "key").exists()


def test_a_keyed_endpoint_answers_the_client_that_sends_the_key_and_refuses_one_that_does_not(tmp_path):
    model = str(make_model(tmp_path / "m" / "qwen", shards=2))
    port = free_port()
    proc = SimProcess(
        launcher_argv(
            "vllm", "serve", model, "--port", str(port), "--served-model-name", "sim-model", "--api-key", "sk-k1"
        ),
        speed=50,
    ).start()
    try:
        proc.wait_for("Application startup complete.", timeout=120)
        w = client.Workload([2], input_len=8, output_len=4, prompts_per_slot=2)
        argv = [
            a.replace("__DIR__", str(tmp_path))
            for a in launcher_argv("vllm") + client.bench_args(port, "sim-model", model, w, 2)
        ]
        keyed = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=sim_env(None) | {"OPENAI_API_KEY": "sk-k1"}
        )
        assert keyed.returncode == 0, keyed.stdout + keyed.stderr
        assert json.loads((tmp_path / "c2.json").read_text())["completed"] == w.num_prompts(2)
        bare = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            env={k: v for k, v in sim_env(None).items() if k != "OPENAI_API_KEY"},
        )
        assert bare.returncode != 0  # every request refused: 401
    finally:
        proc.terminate()
