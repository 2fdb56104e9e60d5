"""`sparktui diagnose` as users run it: bad option values, odd bytes on stdin, the per-node phase in --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.cli import main

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"


def corpus_log(name: str, tmp_path: Path) -> Path:
    """The log part of a corpus file, as a user would save it."""
    raw = (CORPUS / name).read_bytes()
    out = tmp_path / name
    out.write_bytes(raw.partition(b"\n---\n")[2])
    return out


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "-inf", "abc", "1e400"])
def test_hang_after_must_be_a_positive_finite_number(value, capsys, tmp_path):
    log = corpus_log("sglang_weights_loading_cut.log", tmp_path)
    assert main(["diagnose", "--engine", "sglang", f"--hang-after={value}", str(log)]) == 2
    assert "--hang-after: expected a positive number of seconds" in capsys.readouterr().err


def test_phase_limits_are_checked(capsys, tmp_path):
    log = corpus_log("sglang_weights_loading_cut.log", tmp_path)
    assert main(["diagnose", "--engine", "sglang", "--limit", "weights=600", str(log)]) == 1
    assert main(["diagnose", "--engine", "sglang", "--limit", "loading=600", str(log)]) == 2
    assert "PHASE=SECONDS" in capsys.readouterr().err
    assert main(["diagnose", "--engine", "sglang", "--limit", "weights=nan", str(log)]) == 2


def test_json_names_phase_rank_and_last_line_per_node(capsys, tmp_path):
    log = corpus_log("vllm_ray_nccl_init_start_no_complete.log", tmp_path)
    assert main(["diagnose", "--json", str(log)]) == 1
    out = json.loads(capsys.readouterr().out)
    (node,) = out["nodes"]
    assert (node["phase"], node["rank"]) == ("nccl_init", 1)
    assert node["last_line"]["line"] == 8 and node["last_line"]["text"].endswith("mwh-deployment-cp2nvtm93l1ljsuft5k")
    (p,) = out["problems"]
    assert (p["kind"], p["phase"], p["rank"]) == ("stopped", "nccl_init", 1)
    assert "stopped during NCCL communicator init on rank 1" in p["message"] and "rendezvous hang" in p["message"]


def test_text_output_names_where_each_node_got(capsys, tmp_path):
    log = corpus_log("sglang_weights_loading_cut.log", tmp_path)
    assert main(["diagnose", "--engine", "sglang", str(log)]) == 1
    out = capsys.readouterr().out
    assert "stopped" in out and "reached weight loading" in out
    # the milestones in words, as everywhere else; --json keeps the ids
    assert "container started" in out and "loading weights 98 %" in out
    assert "container_started" not in out and "weights_loading" not in out


def test_invalid_utf8_on_stdin_under_a_strict_locale_is_read_with_replacement():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONUTF8", "PYTHONIOENCODING"))}
    env.update(LANG="C", LC_ALL="C", PYTHONUTF8="0", PYTHONPATH=str(ROOT))
    data = (
        b"INFO 03-02 11:19:02 [worker.py:1] caf\xe9 \xff\xfe\n"
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB \x80\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", "diagnose", "--engine", "vllm", "--json", "-"],
        input=data,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 1, r.stderr.decode(errors="replace")
    assert b"Traceback" not in r.stderr
    out = json.loads(r.stdout)
    assert out["problems"][0]["kind"] == "out_of_memory"


def test_phase_limits_come_from_the_config_checked_and_written_back(tmp_path):
    from sparktui.core.config.config import ConfigError, load_config
    from sparktui.core.config.configwrite import checked_text

    example = (ROOT / "config.example.yaml").read_text()
    path = tmp_path / "c.yaml"
    path.write_text(example.replace("phase_limits: {}", "phase_limits: {weights: 3600, graphs: 600}"))
    config = load_config(path)
    assert config.engine.phase_limits == {"weights": 3600.0, "graphs": 600.0}
    assert "weights: 3600" in checked_text(config)  # the config writer keeps them
    path.write_text(example.replace("phase_limits: {}", "phase_limits: {weight: 3600}"))
    with pytest.raises(ConfigError, match="unknown phase 'weight'.*did you mean 'weights'"):
        load_config(path)
    path.write_text(example.replace("phase_limits: {}", "phase_limits: {weights: -1}"))
    with pytest.raises(ConfigError, match="weights"):
        load_config(path)


def test_what_sparktui_logs_saved_is_read_per_node(capsys, tmp_path):
    """`sparktui logs -t > FILE` writes "NODE │ line" with every node's lines in turn: each node's silence and
    ranks are its own (the real CPU vLLM, rendezvous on a subnet that drops the peer's packets)."""
    log = corpus_log("vllm_cpu_native_rendezvous_on_dropped_subnet.log", tmp_path)
    assert main(["diagnose", "--json", str(log)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["state"] == "hung"
    [hang, *_] = [p for p in doc["problems"] if p["kind"] == "rendezvous_hang"]
    assert hang["node"] == "node2" and hang["rank"] == 1 and "no output for 133 s" in hang["message"]
    begun = {m["node"] for m in doc["milestones"] if m["kind"] == "dist_init_begin"}
    assert begun == {"node1", "node2"}
    # a line whose "node" part has a space is not a node's: read whole, as before
    plain = tmp_path / "plain.log"
    plain.write_text("a b │ (Worker pid=1) INFO [parallel_state.py:1906] world_size=2 rank=1\n")
    main(["diagnose", "--engine", "vllm", "--json", str(plain)])
    doc = json.loads(capsys.readouterr().out)
    assert doc["problems"] and {p["node"] for p in doc["problems"]} == {None}
    assert {m["node"] for m in doc["milestones"]} == {None}
