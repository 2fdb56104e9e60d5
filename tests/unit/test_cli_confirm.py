"""The confirmation before a deployment changes: the prompt shows its default, and a run without a
terminal refuses with the way to go ahead."""

from __future__ import annotations

import io

import pytest

from sparktui.cli import common, deploy, main
from sparktui.core.deploy.operations import Preview

PREVIEW = Preview("pivot lab to vllm", stops=[("n1", "sparktui-lab-sglang-0 (running)")], starts=[("n1", "vllm head")])


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("answer", "goes"), [("y", True), ("YES", True), (" yes ", True), ("", False), ("n", False), ("sure", False)]
)
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


class _Ops:
    """Operations as the launch's stale-container offer uses it: records what it was asked to remove."""

    def __init__(self):
        self.asked: list[dict] = []

    async def remove_stale(self, stale):
        self.asked.append(stale)
        return [{"node": n, "removed": names, "error": None} for n, names in stale.items()]


def _prepared_with_stale():
    import json as _json
    from types import SimpleNamespace

    from sparktui.core.preflight import Setting, Verdict
    from sparktui.core.preflight.leftovers import leftovers_of

    row = _json.dumps(
        {
            "ID": "x",
            "Names": "old-r0",
            "Image": "img",
            "State": "exited",
            "Status": "Exited (1)",
            "Labels": "sparktui.deployment=old,sparktui.engine=vllm",
        }
    )
    v = Verdict(Setting(addr="10.0.0.1", port=1, subnet=None, image="img", timeout=30))
    v.leftovers["n2"] = leftovers_of("n2", "lab", [row], [], None, unified=False)
    return SimpleNamespace(verdict=v)


def _args(yes: bool, json: bool = False):
    from types import SimpleNamespace

    return SimpleNamespace(yes=yes, json=json)


def test_stale_containers_are_kept_without_a_terminal_and_the_words_say_to_pass_yes(monkeypatch, capsys):
    import asyncio

    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    ops = _Ops()
    doc = asyncio.run(deploy._stale(ops, _prepared_with_stale(), _args(yes=False)))
    assert ops.asked == [] and doc["kept"] is True and doc["removed"] == []
    err = capsys.readouterr().err
    assert "old-r0" in err and "not removed: pass --yes" in err


def test_stale_containers_are_removed_with_yes_or_a_yes_at_the_prompt(monkeypatch, capsys):
    import asyncio

    ops = _Ops()
    doc = asyncio.run(deploy._stale(ops, _prepared_with_stale(), _args(yes=True, json=True)))
    assert ops.asked == [{"n2": ["old-r0"]}] and doc["removed"] == [{"node": "n2", "container": "old-r0"}]
    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    assert asyncio.run(deploy._stale(_Ops(), _prepared_with_stale(), _args(yes=False)))["kept"] is True
    monkeypatch.setattr("sys.stdin", Tty("y\n"))
    ops = _Ops()
    asyncio.run(deploy._stale(ops, _prepared_with_stale(), _args(yes=False)))
    assert ops.asked == [{"n2": ["old-r0"]}]
