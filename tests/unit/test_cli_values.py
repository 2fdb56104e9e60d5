"""Option values are checked before any node is asked: a bad one exits 2 with a short reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.core.config import argcheck

ROOT = Path(__file__).resolve().parents[2]
# A node nobody answers for: if the command got as far as dialling, the journal would show it.
CONFIG = """cluster: c
nodes: [{name: a, host: 127.0.0.1, port: 9}]
model: {name: m, path: /models/m}
ssh: {connect_timeout: 1}
"""


@pytest.mark.parametrize(
    "value",
    [
        "2026-01-02",
        "2026-01-02T10:00:00Z",
        "2026-01-02T10:00:00.123456789+02:00",
        "1767348000",
        "1767348000.5",
        "10m",
        "1h30m",
        "2.5s",
    ],
)
def test_since_accepts_what_docker_accepts(value):
    assert argcheck.docker_since(value) == value


@pytest.mark.parametrize("value", ["$(x)", "`id`", "10 m", "yesterday", "", "-5m", "2026-13-1", "1" * 40])
def test_since_refuses_the_rest(value):
    with pytest.raises(ValueError, match="--since"):
        argcheck.docker_since(value)


def test_rates_and_seconds():
    assert [argcheck.rsync_rate(v) for v in ("200m", "1.5G", "50000", "10MiB", "0")] == [
        "200m",
        "1.5G",
        "50000",
        "10MiB",
        "0",
    ]
    for bad in ("garbage", "10 m", "-5", "1e9", "$(x)"):
        with pytest.raises(ValueError, match="--bwlimit"):
            argcheck.rsync_rate(bad)
    assert argcheck.seconds("120") == 120.0
    for bad in ("nan", "inf", "-1", "0", "1e400", "x"):
        with pytest.raises(ValueError, match="--timeout"):
            argcheck.seconds(bad)


@pytest.mark.parametrize(
    "argv,words",
    [
        (["logs", "--since", "$(x)"], "--since '$(x)' is not a time"),
        (["sync", "model", "--bwlimit", "garbage"], "--bwlimit 'garbage' is not a rate"),
        (["launch", "--timeout", "nan"], "--timeout 'nan' is not a number of seconds"),
        (["preflight", "--timeout", "-1"], "--timeout '-1'"),
        (["metrics", "--interval", "0"], "--interval '0' is not a number of seconds"),
        (["logs", "--since", "x" * 100_000], "(100002 characters)"),  # near the OS limit for one argument
        (["plan", "--engine", "x" * 100_000], "characters)"),  # argparse's own messages are shortened too
    ],
)
def test_bad_values_exit_2_before_any_remote_command(tmp_path, argv, words):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp_path / "state"))
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", "--config", str(cfg), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr[-500:]
    assert len(r.stderr) < 2000  # the bad value is not echoed whole
    journal = list((tmp_path / "state").rglob("*.jsonl"))
    assert not journal or not [json.loads(x) for x in journal[0].read_text().splitlines()]  # nothing ran


@pytest.mark.parametrize(
    "argv,hint",
    [
        (["plan", "--engine", "vlm"], "did you mean 'vllm'?"),
        (["pivot", "--to", "VLLM"], "did you mean 'vllm'? names are case-sensitive"),
        (["plna"], "did you mean 'plan'?"),
    ],
)
def test_a_bad_choice_is_one_line_with_the_likely_one(argv, hint, capsys):
    from sparktui.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and hint in err
    # the error alone, not argparse's usage block before it
    assert "usage:" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "message",
    [
        "argument --engine: invalid choice: 'vlm' (choose from 'sglang', 'trtllm', 'vllm')",  # CPython 3.11-3.13
        # suggest_on_error (CPython 3.14, on by default from 3.15) puts argparse's own guess in between
        "argument --engine: invalid choice: 'vlm', maybe you meant 'vllm'? (choose from 'sglang', 'trtllm', 'vllm')",
    ],
)
def test_either_wording_of_a_bad_choice_is_one_line_with_the_likely_one(message, capsys):
    from sparktui.cli import _Parser

    with pytest.raises(SystemExit) as e:
        _Parser(prog="sparktui plan").error(message)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == (
        "sparktui plan: error: argument --engine: invalid choice: 'vlm'; "
        "did you mean 'vllm'? (choices: sglang, trtllm, vllm)\n"
    ), err
