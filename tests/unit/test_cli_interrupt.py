"""Ctrl-C during a launch or a sync stops only the watching: the CLI says what keeps running where,
and the commands to watch or stop it."""
from __future__ import annotations

import argparse
import asyncio

import pytest

from sparktui.cli import deploy, sync
from sparktui.core.deploy.operations import Choices, Op, Prepared, Preview


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
    assert "model-b-1: model a → b" in err and "sparktui sync status" in err and "sparktui sync cancel ID" in err
