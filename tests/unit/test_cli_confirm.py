"""The confirmation before a deployment changes: the prompt shows its default, and a run without a
terminal refuses with the way to go ahead."""
from __future__ import annotations

import io

import pytest

from sparktui.cli import common, deploy, main
from sparktui.core.deploy.operations import Preview

PREVIEW = Preview("pivot lab to vllm", stops=[("n1", "sparktui-lab-sglang-0 (running)")],
                  starts=[("n1", "vllm head")])


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "goes"), [("y", True), ("YES", True), (" yes ", True), ("", False),
                                              ("n", False), ("sure", False)])
def test_the_prompt_shows_its_default_and_only_yes_goes_ahead(monkeypatch, capsys, answer, goes):
    monkeypatch.setattr("sys.stdin", Tty(answer + "\n"))
    assert common.confirm("go ahead?", False) is goes
    assert "go ahead? [y/N]" in capsys.readouterr().out


def test_without_a_terminal_the_refusal_says_to_pass_yes(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(common.CliExit) as e:
        deploy._ask(PREVIEW, yes=False)
    assert e.value.code == 1
    assert "nothing changed" in e.value.message and "--yes" in e.value.message
    assert "stop  sparktui-lab-sglang-0" in capsys.readouterr().err  # what would have changed, said first


def test_without_a_terminal_the_json_document_names_yes_as_the_fix(monkeypatch, capsys):
    async def refuse(args):  # what stop and pivot do when nobody can confirm
        deploy._ask(PREVIEW, yes=False)

    import sparktui.cli.journal as J
    real = J.register

    def register(sub):  # `journal` stands in for the command: only its function matters here
        real(sub)
        sub.choices["journal"].set_defaults(func=refuse)
    monkeypatch.setattr(J, "register", register)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["journal", "--all", "--json"]) == 1
    import json

    doc = json.loads(capsys.readouterr().out)
    assert "--yes" in doc["fix"] and doc["reason"] == "no terminal to confirm on", doc
