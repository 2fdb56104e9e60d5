"""Ctrl-C during a launch or a sync stops only the watching: the CLI says what keeps running where,
and the commands to watch or stop it."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from sparktui.cli import deploy, sync
from sparktui.core.deploy.operations import Choices, Op, Prepared, Preview
from sparktui.core.state.deployment import Deployment
from sparktui.core.state.states import State


def test_an_interrupted_launch_names_what_runs_on_which_node_and_how_to_stop_it(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("cluster: sparks\nnodes:\n  - {name: a, host: 127.0.0.1}\nmodel: {name: m, path: /models/m}\n")
    args = argparse.Namespace(config=str(cfg))
    p = Prepared(Op.LAUNCH, "other", Choices(), Preview("Launch other", [], [("a", "sparktui-other-vllm-0 (vllm)")]))
    for exc in (KeyboardInterrupt, asyncio.CancelledError):
        with pytest.raises(exc):
            with deploy.interrupted(args, p):
                raise exc()
        err = capsys.readouterr().err
        assert "keeps running on the nodes" in err and "a: sparktui-other-vllm-0 (vllm)" in err
        assert f"sparktui logs -f --config {cfg} --deployment other" in err
        assert f"sparktui stop --config {cfg} --deployment other" in err
    with deploy.interrupted(args, p):
        pass  # no interruption, nothing said
    assert capsys.readouterr().err == ""


def test_an_interrupted_sync_names_the_copies_and_the_commands(capsys):
    sync._interrupted(argparse.Namespace(config=None), {"model-b-1": "model a → b"})
    err = capsys.readouterr().err
    assert "model-b-1: model a → b" in err and "sparktui sync status" in err and "sparktui sync cancel model-b-1" in err


def test_sigterm_during_a_launch_says_what_keeps_running_too(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    cfg = tmp_path / "c.yaml"
    cfg.write_text("cluster: sparks\nnodes:\n  - {name: a, host: 127.0.0.1}\nmodel: {name: m, path: /models/m}\n")
    code = (
        "import argparse, asyncio, sys\n"
        "from sparktui.cli import deploy\nfrom sparktui.cli.common import CliExit\n"
        "from sparktui.core.deploy.operations import Choices, Op, Prepared, Preview\n"
        "p = Prepared(Op.LAUNCH, 'sparks', Choices(), Preview('Launch', [], [('a', 'sparktui-sparks-vllm-0 (vllm)')]))\n"
        "async def main():\n"
        "    with deploy.interrupted(argparse.Namespace(config=sys.argv[1]), p):\n"
        "        print('watching', flush=True)\n"
        "        await asyncio.Event().wait()\n"
        "try:\n    asyncio.run(main())\nexcept CliExit as e:\n    sys.exit(e.code)\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.stdout.readline().strip() == "watching"  # inside the launch's watch
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "a: sparktui-sparks-vllm-0 (vllm)" in err
    assert f"sparktui stop --config {cfg}" in err and "Traceback" not in err


def test_the_pivot_suggested_after_a_hang_runs_as_printed(tmp_path, capsys):
    import shlex
    from types import SimpleNamespace

    from sparktui.cli import build_parser

    cfg = tmp_path / "my cluster.yaml"
    cfg.write_text("cluster: sparks\nnodes:\n  - {name: a, host: 127.0.0.1}\nmodel: {name: m, path: /models/m}\n")
    d = SimpleNamespace(
        name="other",
        warnings=[],
        check=None,
        current=Deployment("other", "sglang", "native", None, state=State.HUNG, detail="rendezvous_hang on a: silent"),
    )
    deploy.print_outcome(d, argparse.Namespace(config=str(cfg)))
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "next:" in ln)
    cmd = shlex.split(line.split("next:", 1)[1].split("   (")[0])
    assert cmd[0] == "sparktui"
    parsed = build_parser(cmd[1:]).parse_args(cmd[1:])
    assert (parsed.command, parsed.to, parsed.config, parsed.deployment) == ("pivot", "vllm", str(cfg), "other")


def test_a_failed_launch_says_which_containers_it_left_running_and_how_to_remove_them(tmp_path, capsys):
    import json
    import shlex
    from types import SimpleNamespace

    from sparktui.cli import build_parser

    cfg = tmp_path / "c.yaml"
    cfg.write_text("cluster: sparks\nnodes:\n  - {name: a, host: 127.0.0.1}\nmodel: {name: m, path: /models/m}\n")

    class Failed(SimpleNamespace):
        async def wait(self, timeout=None, until=()):
            return self.current.state

        async def leftovers(self):
            return [("a", "sparktui-sparks-vllm-0", "running"), ("b", "sparktui-sparks-vllm-1", "running")]

    d = Failed(
        name="sparks",
        warnings=[],
        check=None,
        ready_timeout=10,
        problems=[],
        milestones=[],
        memory={},
        current=Deployment(
            "sparks",
            "vllm",
            "ray",
            None,
            plan_id="p",
            state=State.FAILED,
            detail="bad_arguments on a: the engine rejected its arguments: --bogus",
        ),
    )
    printer = deploy.Printer(SimpleNamespace(nodes=[]), quiet=True)
    args = argparse.Namespace(config=str(cfg), wait=True, json=False)
    assert asyncio.run(deploy._finish(d, printer, args)) == 1
    out = capsys.readouterr().out
    assert "still on the nodes" in out and "a: sparktui-sparks-vllm-0 (running)" in out
    stop = shlex.split(out.split("remove them:", 1)[1].strip())
    assert build_parser(stop[1:]).parse_args(stop[1:]).command == "stop"  # runs as printed
    args.json = True
    assert asyncio.run(deploy._finish(d, printer, args)) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["left_on_nodes"][1] == {"node": "b", "container": "sparktui-sparks-vllm-1", "state": "running"}


def test_an_interrupted_sync_before_any_copy_does_not_claim_copies_keep_running(capsys):
    # a note before any copy carries the id "-": it is no copy, and it is never printed as one
    sync._interrupted(argparse.Namespace(config=None), {"-": "model a → -"}, {"-": "preparing"})
    err = capsys.readouterr().err
    assert "no copy had started" in err and "keep running" not in err.replace("none keeps running", "")
    assert "-:" not in err


def test_an_interrupted_verification_says_the_copy_stays_incomplete_until_the_next_sync(capsys):
    sync._interrupted(
        argparse.Namespace(config=None),
        {"model-b-1": "model a → b", "model-c-1": "model a → c"},
        {"model-b-1": "verifying", "model-c-1": "running"},
    )
    err = capsys.readouterr().err
    copying, verifying = err.split("were being verified")
    assert "model-c-1: model a → c" in copying and "model-b-1" not in copying
    assert "model-b-1: model a → b" in verifying and "marked incomplete until `sparktui sync model`" in err
    assert "sparktui sync cancel model-c-1" in err


def test_a_hint_names_its_commands_with_the_config_given(tmp_path, capsys):
    import shlex

    from sparktui.cli import build_parser
    from sparktui.core.diagnosis.diagnose import Problem
    from sparktui.core.engines import get_engine

    cfg = tmp_path / "my cluster.yaml"
    deploy.print_problem(Problem("rendezvous_hang", 1, "silent", get_engine("sglang").hang_hint(), "a", 0.0), str(cfg))
    out = " ".join(capsys.readouterr().out.split())  # (the console wraps: words, one space apart)
    cmd = shlex.split(out.split("pivot to vLLM with Ray (`", 1)[1].split("`", 1)[0])
    parsed = build_parser(cmd[1:]).parse_args(cmd[1:])
    assert (parsed.command, parsed.to, parsed.config) == ("pivot", "vllm", str(cfg))
