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


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--version"], None),
        ([], None),
        (["--config", "x.yaml", "check", "--json"], "check"),
        (["-c", "plan", "plan"], "plan"),
        (["--theme", "light"], None),
        (["--config=a.yaml", "logs", "n1"], "logs"),
    ],
)
def test_the_command_word_is_found_past_global_options(argv, word):
    assert command_word(argv) == word


def test_version_loads_no_ssh_rich_or_tui_code():
    probe = (
        "import sys\nfrom sparktui.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('asyncssh', 'rich', 'textual', 'yaml', 'sparktui.core.remote.ssh') if m in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unreachable_config(tmp_path):
    """A node on a loopback port nothing listens on: refused at once."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"cluster: sparks\nnodes:\n  - {{name: a, host: 127.0.0.1, port: {_free_port()}}}\n"
        f"model: {{name: m, path: /models/m}}\nssh: {{known_hosts: {tmp_path / 'kh'}, ssh_config: []}}\n"
    )
    return cfg


def _run_probe(probe: str, cfg, tmp_path) -> subprocess.CompletedProcess:
    """`python3 -c PROBE CONFIG` with this checkout's sparktui and a state folder of the test's own."""
    r = subprocess.run(
        [sys.executable, "-c", probe, str(cfg)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path)},
    )
    assert r.returncode == 0, r.stderr
    return r


def test_check_json_prints_without_rich_or_the_tui(tmp_path):
    cfg = _unreachable_config(tmp_path)  # reported in the JSON
    probe = (
        "import json, sys\nfrom sparktui.cli import main\ncode = main(['--config', sys.argv[1], 'check', '--json'])\n"
        "print(code, sorted(m for m in ('rich', 'humanize', 'textual') if m in sys.modules))"
    )
    r = _run_probe(probe, cfg, tmp_path)
    *report, last = r.stdout.strip().splitlines()
    assert last == "1 []"  # unreachable: exit 1, and neither rich nor Textual was loaded to say so
    assert '"reachable": false' in "\n".join(report)


def test_the_tui_dials_the_nodes_before_it_loads_textual(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("cluster: sparks\nnodes:\n  - {name: a, host: 127.0.0.1}\nmodel: {name: m, path: /models/m}\n")
    probe = (
        "import sys\nfrom sparktui.cli import main, tui\nfrom sparktui.tui.controller import Controller\n"
        "tui.need_terminal = lambda instead: None\n"
        "def prestart(self):\n    print('textual' in sys.modules, flush=True)\n    raise SystemExit(0)\n"
        "Controller.prestart = prestart\nmain(['--config', sys.argv[1]])\n"
    )
    r = _run_probe(probe, cfg, tmp_path)
    assert r.stdout.strip() == "False"  # the probes start while the screen's code is still to load


def test_a_tui_that_cannot_load_stops_the_probes_it_began(tmp_path):
    cfg = _unreachable_config(tmp_path)
    probe = (
        "import sys, threading\nfrom sparktui.cli import main, tui\ntui.need_terminal = lambda instead: None\n"
        "sys.modules['sparktui.tui.app'] = None  # the screen's code fails to import\n"
        "code = main(['--config', sys.argv[1]])\n"
        "print(code, [t.name for t in threading.enumerate() if t.name == 'sparktui-core' and t.is_alive()])\n"
    )
    r = _run_probe(probe, cfg, tmp_path)
    assert r.stdout.strip().splitlines()[-1] == "1 []"  # exit 1, and no core thread left probing
    assert "the TUI is not available in this build" in r.stderr
