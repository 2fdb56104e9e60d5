"""`sparktui sync` and `setup trust`: parsing, progress bars fed by events, status lines, exit codes."""

from __future__ import annotations

import argparse
import json

import pytest

from sparktui.cli import build_parser
from sparktui.cli import sync as sync_cli
from sparktui.core.state.events import TransferProgress
from sparktui.core.transfers import Outcome

MiB = 1 << 20


def test_commands_parse():
    p = build_parser()
    a = p.parse_args(["sync", "model", "--to", "node2", "--to", "node3", "--wait", "--json", "--checksum"])
    assert (a.to, a.wait, a.json, a.checksum, a.func) == (["node2", "node3"], True, True, True, sync_cli.cmd_model)
    a = p.parse_args(["sync", "image", "sglang", "--streams", "1"])
    assert (a.image, a.streams, a.wait, a.func) == ("sglang", 1, False, sync_cli.cmd_image)
    assert p.parse_args(["sync", "cancel", "model-n2-x"]).id == "model-n2-x"
    a = p.parse_args(["setup", "trust", "--yes", "--from", "node1"])
    assert (a.yes, a.senders, a.func) == (True, ["node1"], sync_cli.cmd_trust)


def test_trust_joins_a_setup_group_registered_before():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command")
    setup = sub.add_parser("setup")
    inner = setup.add_subparsers(dest="what")
    inner.add_parser("other").set_defaults(func="other")
    sync_cli.register(sub)
    assert p.parse_args(["setup", "trust", "--yes"]).func is sync_cli.cmd_trust
    assert p.parse_args(["setup", "other"]).func == "other"


def test_bars_show_sizes_rates_and_end_states():
    bars = sync_cli.Bars()
    bars(
        TransferProgress(
            "t1",
            "model",
            "node1",
            "node2",
            "running",
            bytes=12 * MiB,
            total_bytes=100 * MiB,
            percent=12.0,
            rate=40 * MiB,
            eta=95,
            files_done=2,
            files_total=8,
        )
    )
    [task] = bars.progress.tasks
    assert task.completed == 12.0
    info = task.fields["info"]
    assert "12.0 MiB / 100.0 MiB" in info and "40.0 MiB/s" in info and "files 2/8" in info
    assert "minute" in info  # 95 s, said the human way
    bars(TransferProgress("t1", "model", "node1", "node2", "failed", message="rsync exit 11: disk full"))
    [task] = bars.progress.tasks
    assert task.fields["info"] == "failed: rsync exit 11: disk full" and task.completed == 12.0
    bars(TransferProgress("-", "model", "node1", "-", "preparing", message="over the management subnet"))
    assert len(bars.progress.tasks) == 1  # a note, not a destination


def test_bars_say_how_many_streams_run_and_the_cipher():
    bars = sync_cli.Bars()
    rows = [{"n": 0, "done": False}, {"n": 1, "done": True, "rc": 0}, {"n": 2, "done": False}]
    bars(
        TransferProgress(
            "t1",
            "model",
            "node1",
            "node2",
            "running",
            bytes=MiB,
            total_bytes=4 * MiB,
            percent=25.0,
            rate=MiB,
            streams=rows,
            cipher="aes128-gcm@openssh.com",
        )
    )
    info = bars.progress.tasks[0].fields["info"]
    assert "2/3 streams" in info and info.endswith("ssh aes128-gcm")


def test_status_lines():
    rows = sync_cli.status_rows(
        [
            {
                "id": "model-node2-1",
                "kind": "model",
                "source": "node1",
                "dest": "node2",
                "state": "running",
                "bytes": 50 * MiB,
                "total_bytes": 200 * MiB,
                "percent": 25.0,
                "rate": 10 * MiB,
                "eta": 15,
                "path": "/models/m",
                "started": None,
                "message": None,
            },
            {
                "id": "image-node3-1",
                "kind": "image",
                "source": "node1",
                "dest": "node3",
                "state": "failed",
                "bytes": 0,
                "total_bytes": None,
                "percent": None,
                "rate": None,
                "eta": None,
                "image": "img:1",
                "started": None,
                "message": "ssh from node1 to node3 failed",
            },
        ]
    )
    assert "25%" in rows[0] and "50.0 MiB/200.0 MiB" in rows[0] and "10.0 MiB/s" in rows[0]
    assert rows[1].endswith("\n    ssh from node1 to node3 failed") and "img:1" in rows[1]


def test_exit_code_and_json_of_outcomes(capsys):
    ok = Outcome("node2", True, "verified", "node1", "model-node2-1")
    bad = Outcome("node3", False, "no trust", "node1")
    assert sync_cli._report([ok], True, True) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"dest": "node2", "ok": True, "message": "verified", "source": "node1", "id": "model-node2-1"}
    ]
    assert sync_cli._report([ok, bad], False, True) == 1
    assert "FAILED node3 from node1: no trust" in capsys.readouterr().out


def test_unknown_destination_is_bad_input():
    from sparktui.cli.common import CliExit
    from sparktui.core.config.config import Config, ModelConfig, NodeConfig

    cfg = Config(
        cluster="c",
        nodes=[NodeConfig("node1", "h1", role="head"), NodeConfig("node2", "h2")],
        model=ModelConfig("m", "/models/m"),
    )
    with pytest.raises(CliExit) as e:
        sync_cli._check_nodes(cfg, ["node2", "nodeX"])
    assert e.value.code == 2 and "nodeX" in e.value.message


def test_a_destination_in_the_wrong_case_is_named_with_its_spelling():
    from sparktui.cli.common import CliExit
    from sparktui.core.config.config import Config, ModelConfig, NodeConfig

    cfg = Config(
        cluster="c",
        nodes=[NodeConfig("spark1", "h1", role="head"), NodeConfig("spark2", "h2")],
        model=ModelConfig("m", "/models/m"),
    )
    with pytest.raises(CliExit) as e:
        sync_cli._check_nodes(cfg, ["Spark2"])
    assert "did you mean 'spark2'? names are case-sensitive" in e.value.message
