"""The CLI imports only what the command given needs: `--version` loads no SSH, rich or TUI code."""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.cli import COMMAND_MODULES, COMMANDS, command_word, main

REPO = Path(__file__).resolve().parents[2]


def test_the_command_table_names_every_command_of_every_module():
    registered = {}
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"sparktui.cli.{name}").register(sub)
        registered.update({word: name for word in sub.choices})
    assert registered == COMMANDS


@pytest.mark.parametrize("argv, word", [
    (["--version"], None), ([], None), (["--config", "x.yaml", "check", "--json"], "check"),
    (["-c", "plan", "plan"], "plan"), (["--theme", "light"], None), (["--config=a.yaml", "logs", "n1"], "logs"),
])
def test_the_command_word_is_found_past_global_options(argv, word):
    assert command_word(argv) == word


def test_version_loads_no_ssh_rich_or_tui_code():
    probe = ("import sys\nfrom sparktui.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('asyncssh', 'rich', 'textual', 'yaml', 'sparktui.core.ssh') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_an_unknown_command_still_lists_every_choice(capsys):
    with pytest.raises(SystemExit) as e:
        main(["chekc"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'chekc'" in err and "preflight" in err


def test_status_loads_the_modules_that_add_its_sections():
    from sparktui.cli import _modules_for

    assert _modules_for(["status", "--json"]) == ["check", "sync", "deploy"]
    assert _modules_for(["plan"]) == ["plan"]
