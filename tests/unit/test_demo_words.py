"""What `sparktui demo up` and the README say about the demo: it stays in the foreground, and its
engines run faster than real ones, so engine times in their logs come sooner than they read."""

from __future__ import annotations

from pathlib import Path

from sparktui.cli.demo import _describe
from sparktui.tui.present.deploy import sim_speed, speed_note

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = {
    "id": "ab12cd34",
    "config": "/tmp/sparktui-demo-ab12cd34/sparktui.yaml",
    "scenario": "pivot",
    "speed": 20.0,
    "nodes": [
        {"name": "spark1", "host": "127.0.0.11", "port": 40001, "fabric": "127.0.1.11"},
        {"name": "spark2", "host": "127.0.0.12", "port": 40002, "fabric": "127.0.1.12"},
    ],
}


def test_demo_up_says_it_stays_in_the_foreground_and_how_fast_its_engines_run():
    text = _describe(SUMMARY)
    first = text.splitlines()[0]
    assert "in the foreground until Ctrl-C here" in first and "sparktui demo down" in first, text
    assert "run 20x faster than real ones" in text and 'a "300 s" timeout comes 15 s after launch' in text, text
    assert "try, from another terminal:" in text  # the commands need a second terminal: this one is held


def test_the_launch_pane_note_names_the_factor_only_for_simulated_engines():
    assert sim_speed({"SPARKTUI_SIM_SPEED": "10"}) == 10.0
    for env in ({}, {"SPARKTUI_SIM_SPEED": "1"}, {"SPARKTUI_SIM_SPEED": "fast"}, {"SPARKTUI_SIM_SPEED": "-2"}):
        assert sim_speed(env) is None, env
    note = speed_note(10.0)
    assert "engines 10× faster than real ones" in note and "300 s pass in 30 s here" in note, note
    assert len(speed_note(2.5)) <= 78  # one row of an 80-column launch pane


def test_readme_says_demo_up_holds_the_terminal_and_the_speed_factor():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`sparktui demo up` starts a simulated cluster without the TUI" in readme
    assert "**stays in the foreground** until Ctrl-C" in readme
    assert "The simulated engines run 10× faster than real ones" in readme


def test_demo_help_lists_every_scenario_with_its_story(capsys, monkeypatch):
    import pytest

    from sparktui.cli import main
    from sparktui.demo.configfile import SCENARIOS

    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps the usage block to the terminal's width
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    usage = next(ln for ln in out.splitlines() if ln.strip().startswith("sparktui demo [--nodes N]"))
    assert f"--scenario {'|'.join(SCENARIOS)}" in usage, usage
    flat = " ".join(out.split())  # the option's help is wrapped by argparse
    for name in SCENARIOS:
        assert f"{name}: " in flat, name
