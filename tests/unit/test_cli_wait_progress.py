"""`launch --wait` (and pivot, redeploy) show progress: steps, phases, milestones, problems with their hint
and the outcome; the engine's raw log is left to `sparktui logs`, named once. Under --json nothing but the
document reaches stdout."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tests.deployments import changed
from sparktui.cli import deploy
from sparktui.cli.common import print_json
from sparktui.core.diagnosis.diagnose import Milestone, Problem
from sparktui.core.state.events import LaunchStep, LogLines

NODES = SimpleNamespace(nodes=[SimpleNamespace(name="spark1"), SimpleNamespace(name="spark2")])
RAW = [f"INFO 06-12 10:00:{i:02d} [model_runner.py:{i}] Loading safetensors shard {i}/180" for i in range(180)]


def events():
    yield LaunchStep("lab", "spark1", 0, 2, "exec", "start vllm serve in the head container", "done")
    for node in ("spark1", "spark2"):
        yield LogLines(node, f"sparktui-lab-vllm-{node[-1]}", RAW[:90])
    yield changed("lab", "vllm", "ray", "loading", "the engine is loading")
    yield Milestone("weights_loading", 120, "spark1", data={"percent": 100})
    yield Problem(
        "nccl_error",
        150,
        "NCCL found no interface named by NCCL_SOCKET_IFNAME on this node",
        "set NCCL_SOCKET_IFNAME to this node's own interface",
        "spark2",
    )
    yield LogLines("spark1", "sparktui-lab-vllm-0", RAW[90:])


def test_wait_shows_progress_and_not_the_engine_log(capsys):
    printer = deploy.Printer(NODES, config_file="my.yaml")
    for e in events():
        printer(e)
    out = capsys.readouterr().out
    assert "Loading safetensors" not in out, out
    assert "start vllm serve in the head container: done" in out
    assert "loading — the engine is loading" in out and "weights loaded" in out
    assert "NCCL_SOCKET_IFNAME on this node" in out and "hint: set NCCL_SOCKET_IFNAME" in out
    told = [ln for ln in out.splitlines() if "sparktui --config my.yaml logs -f" in ln]
    assert len(told) == 1, out  # where the log is: said once, not per batch
    assert len(out.splitlines()) < 12, out


def test_wait_with_json_prints_only_the_document(capsys):
    printer = deploy.Printer(NODES, quiet=True)
    for e in events():
        printer(e)
    print_json({"deployment": "lab", "steps": printer.steps})
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"][0]["description"] == "start vllm serve in the head container"


def test_wait_prints_the_memory_warning_as_passing_and_the_guards_stop_with_its_advice(capsys):
    printer = deploy.Printer(NODES)
    printer(
        Problem(
            "memory_low",
            0,
            "spark2: 9.0 GiB available, 5.0 GiB above the 4.0 GiB floor",
            "launch with X",
            "spark2",
            0.0,
            provisional=True,
        )
    )
    printer(
        Problem(
            "memory_floor",
            0,
            "spark2: 3.1 GiB available, under the 4.0 GiB floor, falling 1.8 GiB/s",
            "lower --gpu-memory-utilization from 0.8 to 0.7",
            "spark2",
            0.0,
        )
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "! memory low on spark2: spark2: 9.0 GiB available, 5.0 GiB above the 4.0 GiB floor"
    assert out[2].startswith("✗ memory floor on spark2: spark2: 3.1 GiB available, under the 4.0 GiB floor, falling")
    assert out[3] == "  hint: lower --gpu-memory-utilization from 0.8 to 0.7"
