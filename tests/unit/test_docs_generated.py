"""docs/cli.md and docs/config.md are generated from the argparse definitions and the config's field
notes; a flag or a note changed in the code without the pages written again fails here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
try:
    import gen_docs
finally:
    sys.path.remove(str(ROOT / "tools"))


def test_the_committed_reference_pages_match_the_code():
    problems = gen_docs.stale()
    assert not problems, "\n".join(problems)


def test_a_stale_page_is_named_with_the_command_that_writes_it(tmp_path):
    for rel, text in gen_docs.pages().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text.replace("--strict", "--strictly"))
    (problem,) = gen_docs.stale(tmp_path)
    assert problem.startswith("docs/cli.md is out of date: run `python3 tools/gen_docs.py`")
    assert "--strict" in problem  # the diff shows what changed


def test_the_cli_page_lists_every_command_and_option():
    page = gen_docs.cli_markdown()
    for words, parser, _ in gen_docs._commands(gen_docs.build_parser()):
        assert f"## `{' '.join(words)}`" in page, words
        for action in parser._actions:
            for opt in action.option_strings:
                if action.help != "==SUPPRESS==" and opt not in ("-h", "--help"):
                    assert f"`{opt}" in page or f", {opt}" in page, (words, opt)


def test_a_config_key_without_a_note_stops_the_generator(monkeypatch):
    notes = dict(gen_docs.NOTES)
    del notes["memory.floor"]
    monkeypatch.setattr(gen_docs, "NOTES", notes)
    with pytest.raises(SystemExit, match="memory.floor"):
        gen_docs.config_markdown()
