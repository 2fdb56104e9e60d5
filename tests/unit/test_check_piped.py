"""`check` and `status` piped into a file or `less`: the tables keep their natural width, nothing cut.

The SSH layer and the probe are replaced by fakes handing back synthetic facts, so nothing is dialled.
"""

from __future__ import annotations

import pytest

from sparktui.cli import check, main

from tests.fakes import FakeCluster, fixed_inventory
from .test_plan import cluster
from .test_plan_cli import CONFIG

LONG_HOST = "spark{}.rack-a.row-3.lab.example.internal"


@pytest.fixture
def piped(monkeypatch, tmp_path):
    """A config, fake nodes with long addresses, and no COLUMNS: stdout is pytest's capture, not a tty."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("COLUMNS", raising=False)
    cfg = tmp_path / "sparktui.yaml"
    cfg.write_text(CONFIG)
    _, facts, subnets = cluster(2)
    for i, f in enumerate(facts.values()):
        f.host = LONG_HOST.format(i + 1)

    async def deployments(cl, config):
        return [
            {
                "summary": "sparktui-qwen3.5-122b-a10b-fp8-vllm-ray on spark1, spark2: ready at "
                "http://192.168.100.10:8000/v1 (model /models/Qwen3.5-122B-A10B-FP8)"
            }
        ]

    monkeypatch.setattr(check, "Cluster", FakeCluster.replacing())  # no node to ask about images: none listed
    monkeypatch.setattr(check, "take_inventory", fixed_inventory(facts, subnets))

    async def transfers(cl, config):
        return []

    # `status` sections are registered with the parser, which main() builds: replace them at their source
    monkeypatch.setattr("sparktui.cli.deploy.deployments_section", deployments)
    monkeypatch.setattr("sparktui.cli.sync.transfer_status", transfers)
    return cfg


@pytest.mark.parametrize("command", ["check", "status"])
def test_piped_tables_are_not_cut_to_80_columns(piped, capsys, command):
    assert main(["--config", str(piped), command]) == 0
    out = capsys.readouterr().out
    assert "…" not in out, out
    rows = [ln for ln in out.splitlines() if ln.startswith("│ spark")]
    assert len(rows) == 2, out  # one row per node: no cell wrapped onto a second line
    for i, row in enumerate(rows):
        assert LONG_HOST.format(i + 1) in row and "1× NVIDIA GB10" in row, row
    assert any("enp1s0f1np1 192.168.100.10 (rocep1s0f1)" in ln for ln in out.splitlines()), out
    if command == "status":  # a deployment's line whole, model path and all
        assert any(ln.endswith("(model /models/Qwen3.5-122B-A10B-FP8)") for ln in out.splitlines()), out


def test_columns_still_decide_when_set(piped, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(check, "_wide", None, raising=False)
    from sparktui.cli import common

    monkeypatch.setitem(common.__dict__, "console", common.console)  # put back after the test
    del common.__dict__["console"]  # made again on first use, as in a fresh run
    assert main(["--config", str(piped), "check"]) == 0
    out = capsys.readouterr().out
    assert max(len(ln.rstrip()) for ln in out.splitlines()) <= 100, out
