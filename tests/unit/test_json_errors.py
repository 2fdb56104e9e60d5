"""`--json` is one JSON document on stdout for every command, refusals and errors included, and a refusal
carries `error`, `reason` and `fix`. The commands are found from the parser, so a new one with --json
fails here until its error path is listed."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.cli import build_parser, main

from tests.fakes import FakeCluster, fixed_inventory
from .test_plan import FABRIC_NAMES, cluster
from .test_plan_cli import CONFIG

REPO = Path(__file__).resolve().parents[2]

# Nodes on 127.0.0.1 port 1: refused at once, nothing leaves this machine.
UNREACHABLE = """cluster: c
nodes: [{name: spark1, host: 127.0.0.1, port: 1}, {name: spark2, host: 127.0.0.1, port: 1}]
model: {name: m, path: /m}
images: {sglang: s, vllm: v}
ssh: {connect_timeout: 2, ssh_config: []}
"""

# Every command that takes --json, with an invocation that refuses or fails (CONF: the unreachable config,
# MISSING: a config that does not exist). demo up needs a cluster of its own and is left to its own tests;
# demo down gets an id no demo has, so no running demo is touched.
ERROR_PATHS: dict[str, list[list[str]]] = {
    "check": [["--config", "CONF", "check"], ["--config", "MISSING", "check"]],
    "status": [["--config", "CONF", "status"]],
    "plan": [
        ["--config", "CONF", "plan", "--engine", "sglang"],
        ["plan", "--engine", "vlm"],
        ["--config", "MISSING", "plan"],
    ],
    "diagnose": [["diagnose", "/nonexistent/log"]],
    "sync model": [["--config", "CONF", "sync", "model"]],
    "sync image": [["--config", "CONF", "sync", "image", "sglang"]],
    "sync status": [["--config", "MISSING", "sync", "status"]],
    "sync cancel": [
        ["--config", "CONF", "sync", "cancel", "model-x-20250101T000000-abcd"],
        ["--config", "CONF", "sync", "cancel", "../etc"],
    ],
    "setup trust": [["--config", "CONF", "setup", "trust", "--yes"]],
    "launch": [["--config", "CONF", "launch"], ["--config", "CONF", "launch", "--tp", "0"]],
    "stop": [["--config", "CONF", "stop", "--yes"]],
    "pivot": [["--config", "CONF", "pivot", "--yes"]],
    "redeploy": [["--config", "CONF", "redeploy", "--yes"]],
    "logs": [["--config", "CONF", "logs"], ["--config", "CONF", "logs", "nosuchnode"]],
    "journal": [["--config", "MISSING", "journal"], ["journal", "--all", "--limit", "0"]],
    "preflight": [["--config", "CONF", "preflight"]],
    "metrics": [["--config", "CONF", "metrics"], ["--config", "CONF", "metrics", "--count", "0"]],
    "bench": [
        ["--config", "CONF", "bench"],
        ["--config", "CONF", "bench", "--concurrency", "0,8"],
        ["--config", "CONF", "bench", "--input-len", "x"],
    ],
    "drop-caches": [["--config", "CONF", "drop-caches"], ["--config", "CONF", "drop-caches", "nosuchnode"]],
    "init": [["init", "--node", "a=127.0.0.1,port=1", "--model-path", "/m", "-o", "OUT"], ["init"]],
    "demo": [["demo"]],  # the interactive demo, without a terminal to run in
    "demo down": [["demo", "down", "nosuchdemo"]],
    "demo up": [],
}


def _json_commands() -> set[str]:
    """'word' or 'word sub' for every parser that has a --json option."""
    found: set[str] = set()

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for a in p._actions:
            if "--json" in a.option_strings and prefix:
                found.add(prefix)
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, f"{prefix} {name}".strip())

    walk(build_parser(None), "")
    return found


def test_every_command_with_json_has_an_error_path_here():
    assert _json_commands() == set(ERROR_PATHS)


def _run(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    conf = tmp_path / "c.yaml"
    conf.write_text(UNREACHABLE)
    subs = {"CONF": str(conf), "MISSING": str(tmp_path / "none.yaml"), "OUT": str(tmp_path / "out.yaml")}
    env = {k: v for k, v in os.environ.items() if k not in ("SPARKTUI_CONFIG", "COLUMNS", "LINES")}
    env.update(
        PYTHONPATH=str(REPO),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "cfg"),
        XDG_RUNTIME_DIR=str(tmp_path / "run"),
    )
    return subprocess.run(
        [sys.executable, "-m", "sparktui", *[subs.get(a, a) for a in argv], "--json"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
        cwd=tmp_path,
    )


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)  # one document: trailing text is an error too


@pytest.mark.parametrize("argv", [a for paths in ERROR_PATHS.values() for a in paths], ids=" ".join)
def test_a_refusal_under_json_is_one_document_with_error_reason_fix(argv, tmp_path):
    r = _run(argv, tmp_path)
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    doc = _strict(r.stdout)
    assert isinstance(doc, dict), doc
    assert isinstance(doc["error"], str) and doc["error"].strip(), doc
    # reason says why and fix what to do, or they are left out: never the error again, never empty
    assert "reason" not in doc or (isinstance(doc["reason"], str) and doc["reason"] not in ("", doc["error"])), doc
    assert "fix" not in doc or (isinstance(doc["fix"], str) and doc["fix"].strip()), doc
    assert "exited" not in doc["error"], doc  # a reason in words, not just the exit code


def test_a_successful_json_document_is_left_as_the_command_made_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert main(["journal", "--all", "--json"]) == 0
    assert _strict(capsys.readouterr().out) == []


@pytest.fixture
def link_down(monkeypatch, tmp_path):
    """spark2's fabric port has no carrier; the check itself must never be reached."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cfg_file = tmp_path / "sparktui.yaml"
    cfg_file.write_text(CONFIG)
    _, facts, _ = cluster(2)
    fab = facts["spark2"].interfaces[1]
    fab.up, fab.state = False, "no carrier"

    async def never(*a, **kw):
        raise AssertionError("the check ran on a plan that cannot rendezvous")

    monkeypatch.setattr("sparktui.cli.preflight.Cluster", FakeCluster.replacing())
    monkeypatch.setattr("sparktui.core.nodes.inventory.take_inventory", fixed_inventory(facts))
    monkeypatch.setattr("sparktui.core.preflight.run_preflight", never)
    return cfg_file


def test_preflight_json_with_a_fabric_link_down_names_the_link(link_down, capsys):
    assert main(["preflight", "--config", str(link_down), "--json"]) == 1
    cap = capsys.readouterr()
    doc = _strict(cap.out)
    link = FABRIC_NAMES[1]  # spark2's fabric port
    assert "spark2" in doc["error"] and link in doc["reason"], doc
    assert doc["exit"] == 1


def test_a_number_json_cannot_carry_is_written_as_null(capsys):
    from sparktui.cli import common

    common.print_json({"rate": float("inf"), "nodes": [{"eta": float("nan")}], "ok": 1.5})
    assert _strict(capsys.readouterr().out) == {"rate": None, "nodes": [{"eta": None}], "ok": 1.5}


def test_a_refusal_after_the_document_takes_its_words_from_the_check_inside(monkeypatch, capsys):
    from sparktui.cli import common

    async def refuse(args):  # what launch does when its preflight fails: the document, then exit 1
        common.print_json(
            {
                "deployment": "lab",
                "state": "not started",
                "preflight": {
                    "ok": False,
                    "reason": "10.0.0.1:29501 is unreachable from spark2",
                    "fix": "check the fabric cable of spark2",
                },
            }
        )
        raise common.CliExit(1)

    import sparktui.cli.journal as J

    real = J.register

    def register(sub):  # `journal` stands in for launch: only the command's function matters here
        real(sub)
        sub.choices["journal"].set_defaults(func=refuse)

    monkeypatch.setattr(J, "register", register)
    assert main(["journal", "--all", "--json"]) == 1
    doc = _strict(capsys.readouterr().out)
    assert doc["error"] == "10.0.0.1:29501 is unreachable from spark2"
    assert doc["fix"] == "check the fabric cable of spark2"
    assert doc["state"] == "not started"


def test_a_bad_value_is_the_error_alone_or_with_the_value_to_pass(tmp_path):
    doc = _strict(_run(["--config", "CONF", "launch", "--tp", "0"], tmp_path).stdout)
    assert doc == {"error": "--tp must be positive (got 0)", "exit": 2}  # nothing to add: no reason, no fix
    doc = _strict(_run(["plan", "--engine", "vlm"], tmp_path).stdout)
    assert doc["fix"] == "pass --engine vllm" and "reason" not in doc, doc


@pytest.mark.parametrize("argv", [["check"], ["stop", "--yes"], ["sync", "model"]], ids=" ".join)
def test_a_node_not_reached_says_why_and_what_to_do(argv, tmp_path):
    doc = _strict(_run(["--config", "CONF", *argv], tmp_path).stdout)
    assert "connection refused" in doc["error"], doc
    assert doc["reason"] == "nothing accepts SSH connections at the node's host and port", doc
    assert doc["fix"] == "start sshd on the node, or correct its host and port in the config", doc
