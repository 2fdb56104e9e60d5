"""Benchmark rows from the real client's result files, progress from its real log, the local history and
the job's shell text (samples/bench/README.md says how the samples were made)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from sparktui.core.state import statefile
from sparktui.core.bench import client, results

SAMPLES = Path(__file__).parent / "samples" / "bench"
CTX = dict(deployment="lab", engine="vllm", image="img:1", plan_id="p1")


def row(engine: str, c: int, **kw) -> results.Row:
    ctx = {**CTX, "engine": engine, **kw}
    return results.from_client(
        (SAMPLES / f"{engine}-c{c}.json").read_text(), f"{engine}-c{c}.json", concurrency=c, **ctx
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_row_per_concurrency_from_the_clients_result_file(engine):
    one, eight = row(engine, 1), row(engine, 8)
    raw = json.loads((SAMPLES / f"{engine}-c8.json").read_text())
    assert (eight.ttft_p50_ms, eight.ttft_p99_ms, eight.itl_p50_ms) == (
        raw["median_ttft_ms"],
        raw["p99_ttft_ms"],
        raw["median_itl_ms"],
    )
    assert (eight.output_tokens_per_s, eight.requests_per_s) == (raw["output_throughput"], raw["request_throughput"])
    assert eight.completed == 32 and eight.failed == 0 and eight.concurrency == 8
    assert eight.ttft_p50_ms <= eight.ttft_p99_ms
    # more in flight: more served per second
    assert eight.output_tokens_per_s > 3 * one.output_tokens_per_s
    keys = eight.to_json()
    for k in (
        "engine",
        "concurrency",
        "ttft_p50_ms",
        "ttft_p99_ms",
        "itl_p50_ms",
        "output_tokens_per_s",
        "requests_per_s",
    ):
        assert k in keys


def test_a_result_without_the_p99_or_with_nothing_completed_is_one_error_naming_the_file():
    raw = json.loads((SAMPLES / "vllm-c1.json").read_text())
    del raw["p99_ttft_ms"]
    with pytest.raises(statefile.StateFileError, match="c1.json: has no 'p99_ttft_ms'"):
        results.from_client(json.dumps(raw), "c1.json", concurrency=1, **CTX)
    raw = json.loads((SAMPLES / "vllm-c1.json").read_text())
    raw.update(completed=0, failed=8)
    with pytest.raises(statefile.StateFileError, match="no request completed .8 failed"):
        results.from_client(json.dumps(raw), "c1.json", concurrency=1, **CTX)
    with pytest.raises(statefile.StateFileError, match="unreadable"):
        results.from_client('{"completed": 8, "median_ttft_ms": NaN', "c1.json", concurrency=1, **CTX)


def test_progress_follows_the_clients_real_log():
    log = (SAMPLES / "vllm.log").read_text()
    first = log[: log.index(client.MARK + "8")]
    p = client.progress(first)
    assert (p.concurrency, p.done, p.total) == (1, 8, 8)
    p = client.progress(log)
    assert (p.concurrency, p.done, p.total) == (8, 32, 32)
    cut = log[: log.index("9/32")]  # mid-run: the last bar drawn so far
    assert client.progress(cut).done < 9 and client.progress(cut).concurrency == 8
    assert client.progress("").words() == "starting the client"


def test_the_history_keeps_rows_and_skips_a_damaged_line_saying_so_once(tmp_path):
    path = tmp_path / "bench.jsonl"
    results.append([row("sglang", 1, started=1.0), row("sglang", 8, started=1.0)], path)
    with open(path, "a") as f:
        f.write('{"engine": "vllm", "concurrency": "eight"}\nnot json\n')
    results.append([row("vllm", 1, started=2.0), row("vllm", 8, started=2.0)], path)
    rows, problems = results.load(path)
    assert [(r.engine, r.concurrency) for r in rows] == [("sglang", 1), ("sglang", 8), ("vllm", 1), ("vllm", 8)]
    assert len(problems) == 1 and "bench.jsonl:3" in problems[0] and "1 more damaged" in problems[0]
    assert os.stat(path).st_mode & 0o777 == 0o600
    latest, before = results.beside(rows, "lab")
    assert [r.engine for r in latest] == ["vllm", "vllm"] and [r.engine for r in before] == ["sglang", "sglang"]
    assert results.beside(rows, "other") == ([], [])


def test_the_history_of_one_engine_has_nothing_beside(tmp_path):
    path = tmp_path / "bench.jsonl"
    results.append([row("vllm", 1, started=1.0)], path)
    results.append([row("vllm", 1, started=2.0)], path)
    latest, before = results.beside(results.load(path)[0], "lab")
    assert latest[0].started == 2.0 and before == []


def test_the_job_quotes_what_comes_from_the_user_and_runs_every_concurrency_in_order():
    w = client.Workload([1, 8], input_len=64, output_len=16)
    text = client.job("image", "b1", "img:1", 8000, "my model; rm -rf /", "/models/a b", w)
    assert "'my model; rm -rf /'" in text and "'/models/a b:/models/a b:ro'" in text
    assert text.index(client.MARK + "1") < text.index(client.MARK + "8")
    assert "--max-concurrency 1 " in text and "--max-concurrency 8 " in text and "--ignore-eos" in text
    assert "--name sparktui-bench-b1-c8" in text
    # the shell reads it as the words meant (the result directory expands on the node)
    words = shlex.split(text.split("\n")[1].replace('"$PWD"', "/state"))
    assert words[words.index("--model") + 1] == "my model; rm -rf /"
    assert words[words.index("--result-dir") + 1] == "/state"
    with pytest.raises(ValueError):
        client.state_dir_word("../x")


def test_a_missing_client_is_said_by_the_node_and_named_with_the_fix(tmp_path):
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no vllm, no docker
    out = subprocess.run(["/bin/sh", "-c", client.find_client("img:1")], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "none"
    msg = client.missing_message("n1", "img:1")
    assert "n1" in msg and "img:1" in msg and "sparktui sync image vllm --to n1" in msg


def test_the_engine_simulators_vllm_is_the_client_and_one_without_bench_is_not(tmp_path):
    from sparktui.sim import SHIMS_DIR
    from tests.simhelpers import launcher_argv

    sim, old = tmp_path / "sim", tmp_path / "old"
    sim.mkdir()
    old.mkdir()
    # the simulator's `vllm` as its image has it: it serves and carries `bench serve`, as a vLLM image does
    (sim / "vllm").write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in launcher_argv("vllm")) + ' "$@"\n')
    # a vLLM from before the CLI benchmarks: argparse refuses `bench` (its words as such a release prints them)
    (old / "vllm").write_text(
        '#!/bin/sh\n[ "$1" = bench ] || exit 0\necho "usage: vllm [-h] {serve} ..." >&2\n'
        "echo \"vllm: error: argument subparser: invalid choice: 'bench' (choose from 'serve')\" >&2\n"
        "exit 2\n"
    )
    for d in (sim, old):
        (d / "vllm").chmod(0o755)
    repo = Path(__file__).resolve().parents[2]

    def env(d):
        return {"PATH": f"{d}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": f"{SHIMS_DIR}:{repo}"}

    def where(d):
        return subprocess.run(
            ["/bin/sh", "-c", client.find_client("img:1")], env=env(d), capture_output=True, text=True, timeout=60
        ).stdout.strip()

    assert where(sim) == "path"
    assert where(old) == "none"
    # the old vllm run as the client anyway (from an image that holds it): its refusal is known for what it is
    ran = subprocess.run(
        [str(old / "vllm"), "bench", "serve", "--help"], env=env(old), capture_output=True, text=True, timeout=60
    )
    assert ran.returncode != 0 and client.lacks_bench(ran.stdout + ran.stderr)
    assert not client.lacks_bench((SAMPLES / "vllm.log").read_text())


def test_failure_words_pick_the_clients_error_line():
    tail = " 0%|   | 0/8 [00:00<?, ?it/s]\nTraceback (most recent call last):\nOSError: /m does not appear to have a file named config.json\n"
    assert client.failure_words(tail).startswith("OSError: /m does not appear")


def test_the_history_rotates_past_its_size_and_is_still_read_across_the_two_files(tmp_path):
    path = tmp_path / "bench.jsonl"
    size = len(results.statefile.dumps(row("vllm", 1).to_json(), sort_keys=True)) + 1
    for t in range(1, 7):  # three runs fill the file past its limit: it moves aside, whole
        results.append([row("vllm", 1, started=float(t))], path, rotate_bytes=3 * size - 1)
    old = results.rotated(path)
    assert [r.started for r in results.load(old)[0]] == [4.0, 5.0, 6.0]  # runs 1-3 went with the earlier rotation
    assert path.exists() is False or results.load(path)[0] == []
    results.append([row("sglang", 1, started=7.0)], path, rotate_bytes=3 * size - 1)
    rows, problems = results.load(path, last=3)
    assert [r.started for r in rows] == [5.0, 6.0, 7.0] and problems == []
    assert results.beside(rows, "lab")[1][0].engine == "vllm"  # the previous engine, from the rotated file


def test_a_large_history_is_read_from_its_end_in_bounded_memory(tmp_path):
    import tracemalloc

    path = tmp_path / "bench.jsonl"
    line = statefile.dumps(row("vllm", 1).to_json(), sort_keys=True)
    runs = 40_000  # about 20 MB
    with open(path, "w") as f:
        f.writelines(line.replace('"started": 0.0', f'"started": {t}.0') + "\n" for t in range(runs))
        f.write("not json\n")  # the newest line is damaged: named by its line number
    assert path.stat().st_size > 15 << 20
    small = tmp_path / "small.jsonl"
    small.write_text(line + "\nnot json\n")
    results.load(small)  # what a first call imports is not the reading's memory
    tracemalloc.start()
    rows, problems = results.load(path, last=5)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [r.started for r in rows] == [float(t) for t in range(runs - 5, runs)]
    assert len(problems) == 1 and f"bench.jsonl:{runs + 1}" in problems[0]
    assert peak < 2 << 20, peak  # a block and a few rows, not the file


def test_history_lists_the_last_runs_only(tmp_path, monkeypatch, capsys):
    from sparktui.cli import main

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    path = results.history_path()
    for t in range(30):
        results.append([row("vllm", 1, started=float(t)), row("vllm", 8, started=float(t))], path)
    assert main(["bench", "--history", "--json", "--last", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["started"] for r in doc["rows"]] == [27.0, 27.0, 28.0, 28.0, 29.0, 29.0]
    assert main(["bench", "--history", "--deployment", "other"]) == 0
    assert "no benchmark results kept yet" in capsys.readouterr().out
