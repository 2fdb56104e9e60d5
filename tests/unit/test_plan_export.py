"""Exported scripts: valid POSIX sh, no secrets inside, and when run by hand they run the plan's commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sparktui.core.plan.export import export_files, write_export
from sparktui.core.plan.plan import PlanOptions, make_plan

from .test_plan import cluster, make_config

TOKEN = "hf_abcdefgh12345678"
KEY = "sk-live-0987654321"


def _plan(n=2, **opts):
    config = make_config(n)
    config.docker.env = {"HF_TOKEN": TOKEN}
    config, facts, subnets = cluster(n, config)
    return make_plan(config, facts, subnets, PlanOptions(**opts)), subnets


FAKE_DOCKER = """#!{python}
import json, os, sys
with open(os.environ["FAKE_DOCKER_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["exec"] and sys.argv[-2:] == ["ray", "status"]:
    n = int(os.environ.get("FAKE_RAY_NODES", "0"))
    print("Node status\\n-----\\nActive:")
    for i in range(n):
        print(" 1 node_%056x" % (i + 1))
    print("Pending:\\n (no pending nodes)\\nRecent failures:\\n (no failures)")
if sys.argv[1:2] == ["logs"]:
    print(os.environ.get("FAKE_LOGS", ""))
"""


def _run_script(tmp_path: Path, path: Path, **env) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    docker = bindir / "docker"
    docker.write_text(FAKE_DOCKER.format(python=sys.executable))
    docker.chmod(0o755)
    log = tmp_path / "docker.log"
    full = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": "/home/u", "FAKE_DOCKER_LOG": str(log), **env}
    r = subprocess.run(["sh", str(path)], capture_output=True, text=True, env=full, timeout=60)
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    log.unlink(missing_ok=True)
    return r, calls


def _as_exported(argv: list[str], *secret: str) -> list[str]:
    """A plan step's argv as the script runs it: $HOME expanded there, secrets inherited by name."""
    named = {f"HF_TOKEN={TOKEN}": "HF_TOKEN", **({f"{secret[0]}={secret[1]}": secret[0]} if secret else {})}
    return [named.get(a, a).replace("$HOME", "/home/u") for a in argv]


def test_files_names_and_syntax(tmp_path):
    plan, _ = _plan(3, engine="vllm", mode="ray")
    files = export_files(plan)
    assert set(files) == {"0-spark1.sh", "1-spark2.sh", "2-spark3.sh", "README.txt"}
    paths = write_export(plan, tmp_path / "out")
    for p in paths:
        if p.suffix == ".sh":
            assert os.access(p, os.X_OK)
            text = p.read_text()
            assert text.startswith("#!/bin/sh\n") and "\nset -eu\n" in text
            assert subprocess.run(["sh", "-n", str(p)], capture_output=True, timeout=10).returncode == 0


def test_no_secret_value_is_written(tmp_path):
    plan, _ = _plan(2, engine="vllm", mode="ray", extra_args=["--api-key", KEY])
    for name, text in export_files(plan).items():
        assert TOKEN not in text and KEY not in text, name
    head = export_files(plan)["0-spark1.sh"]
    assert ': "${HF_TOKEN:?set HF_TOKEN in the environment first}"' in head
    assert ': "${VLLM_API_KEY:?set VLLM_API_KEY in the environment first}"' in head  # vLLM reads it there
    assert "HF_TOKEN" in export_files(plan)["README.txt"]


def test_readme_gives_the_launch_order():
    plan, _ = _plan(3, engine="sglang")
    readme = export_files(plan)["README.txt"]
    order = [line.split()[-1] for line in readme.splitlines() if line.strip()[:2] in ("1.", "2.", "3.")]
    assert order == ["1-spark2.sh", "2-spark3.sh", "0-spark1.sh"]  # workers first, head last


def test_sglang_scripts_run_the_plan_commands(tmp_path):
    plan, _ = _plan(2, engine="sglang")
    write_export(plan, tmp_path / "x")
    for step in plan.steps:
        script = tmp_path / "x" / f"{step.rank}-{step.node}.sh"
        r, calls = _run_script(tmp_path, script, HF_TOKEN=TOKEN)
        assert r.returncode == 0, r.stderr
        assert calls[0] == ["rm", "-f", step.container]
        assert ["docker"] + calls[1] == _as_exported(step.argv)


def test_scripts_refuse_to_run_without_their_secrets(tmp_path):
    plan, _ = _plan(2, engine="sglang")
    write_export(plan, tmp_path / "x")
    r, calls = _run_script(tmp_path, tmp_path / "x" / "1-spark2.sh")
    assert r.returncode != 0 and "HF_TOKEN" in r.stderr and calls == []


def test_ray_head_script_waits_for_the_cluster_then_serves(tmp_path):
    plan, _ = _plan(2, engine="vllm", mode="ray", extra_args=["--api-key", KEY])
    write_export(plan, tmp_path / "x")
    r, calls = _run_script(
        tmp_path, tmp_path / "x" / "0-spark1.sh", HF_TOKEN=TOKEN, VLLM_API_KEY=KEY, FAKE_RAY_NODES="2"
    )
    assert r.returncode == 0, r.stderr
    run, wait, keep, serve = plan.steps[0], plan.steps[2], plan.steps[3], plan.steps[4]
    assert ["docker"] + calls[1] == _as_exported(run.argv, "VLLM_API_KEY", KEY)
    assert "VLLM_API_KEY" in calls[1]  # the container gets the key from the script's environment
    assert ["docker"] + calls[2] == wait.argv
    assert ["docker"] + calls[3] == keep.argv  # the non-carry-over list, written before serve
    exe = calls[4]
    assert exe[:4] == ["exec", "-d", "-e", f"RAY_ADDRESS={plan.head_ip}:6379"]
    assert "--api-key" not in exe[-1] and "--api-key" not in serve.argv[-1]  # vLLM reads VLLM_API_KEY instead
    assert exe[4:] == serve.argv[5:]


def test_ray_wait_gives_up_and_stops_the_script(tmp_path):
    plan, _ = _plan(2, engine="vllm", mode="ray")
    wait = plan.steps[2]
    wait.timeout, wait.interval = 0.4, 0.2
    write_export(plan, tmp_path / "x")
    r, calls = _run_script(tmp_path, tmp_path / "x" / "0-spark1.sh", HF_TOKEN=TOKEN, FAKE_RAY_NODES="1")
    assert r.returncode == 1 and "gave up" in r.stderr
    assert [c[0] for c in calls] == ["rm", "run", "exec", "exec"]  # two polls, no serve
    assert all(c[-2:] == ["ray", "status"] for c in calls[2:])


def test_native_worker_script_starts_its_rank_then_waits_until_it_dials(tmp_path):
    plan, _ = _plan(2, engine="vllm", mode="native")
    assert plan.ok, plan.errors
    write_export(plan, tmp_path / "x")
    line = "Launching vLLM (v0.33.0) headless multiproc executor, with head node address 10.0.0.1:29500"
    r, calls = _run_script(tmp_path, tmp_path / "x" / "1-spark2.sh", HF_TOKEN=TOKEN, FAKE_LOGS=line)
    assert r.returncode == 0, r.stderr
    run = next(c for c in calls if c[0] == "run")
    assert run[run.index("--master-addr") + 1] == plan.head_ip and "--headless" in run
    assert calls.index(run) < next(i for i, c in enumerate(calls) if c[0] == "logs")
    assert "0-spark1.sh" in (tmp_path / "x" / "README.txt").read_text().split("1-spark2.sh", 1)[1]  # head last
