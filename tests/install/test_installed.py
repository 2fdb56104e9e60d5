""".ci/run's wheel-install run: the wheel in a fresh venv, these tests copied outside the checkout,
SPARKTUI_INSTALLED=1. These prove that the demo tier run beside them exercised the installed package
(console script, package data) and not the sources."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not os.environ.get("SPARKTUI_INSTALLED"), reason="runs in .ci/run's wheel-install run (SPARKTUI_INSTALLED=1)"
)

REPO = Path(__file__).resolve().parents[2]


def test_sparktui_is_imported_from_the_venv_not_the_checkout():
    import sparktui

    where = Path(sparktui.__file__).resolve()
    assert Path(sys.prefix).resolve() in where.parents and "site-packages" in where.parts, where
    assert not (REPO / "sparktui").exists(), "the tests run beside a source tree"


def test_the_console_script_runs_the_demo_help():
    r = subprocess.run(
        [str(Path(sys.executable).parent / "sparktui"), "demo", "--help"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "--scenario" in r.stdout


def test_the_simulator_launchers_are_installed_executable():
    from sparktui.sim import SHIMS_DIR

    for name in ("ray", "vllm"):
        assert os.access(SHIMS_DIR / "bin" / name, os.X_OK), name


def quickstart_block(readme: str) -> str:
    """The README's Quick start commands: the first ```sh block under "## Quick start"."""
    section = readme.split("\n## Quick start", 1)[1]
    return section.split("```sh\n", 1)[1].split("\n```", 1)[0]


@pytest.mark.skipif(
    not os.environ.get("SPARKTUI_QUICKSTART_SRC"),
    reason="runs in .ci/as-user, as an unprivileged user (SPARKTUI_QUICKSTART_SRC: a clone's files)",
)
def test_the_quick_start_as_written_plays_the_demo_story(tmp_path):
    """The two commands a new user pastes, in a clone, in a real terminal: pip resolves today's releases,
    `sparktui demo` opens, the story runs to a chat completion, and q quits leaving nothing behind."""
    import shutil

    from tests.demo.story import walk_seed_story
    from tests.tmuxterm import Tmux

    src = Path(os.environ["SPARKTUI_QUICKSTART_SRC"])
    block = quickstart_block((src / "README.md").read_text())
    assert "sparktui demo" in block and "pip install ." in block
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "quickstart.sh").write_text(block + "\n")
    env = dict(os.environ, HOME=str(home), TMPDIR=str(tmp_path), TERM="xterm-256color")
    env.pop("TMUX", None)
    env.pop("VIRTUAL_ENV", None)
    cmd = f"cd {src} && bash {tmp_path / 'quickstart.sh'}; echo QUICKSTART-EXITED rc=$?; sleep 60"
    assert shutil.which("tmux")
    tui = Tmux(cmd, 80, 24, env, prefix="sparktui-quickstart")
    try:
        walk_seed_story(tui, start_timeout=600)  # the first command installs from the package index
        tui.keys("q")
        tui.wait_for("QUICKSTART-EXITED rc=0", 90)
    finally:
        tui.close()
    assert not list(tmp_path.glob("sparktui-demo-*"))  # the demo's directory went with it
    assert (home / ".sparktui" / "bin" / "sparktui").exists()  # where the README said it would be


def test_commands_say_nothing_on_stderr_but_their_own_words(tmp_path):
    """With whatever releases pip resolved today: no dependency's warning reaches the user."""
    from tests.configs import make_config, write_config

    cfg = write_config(
        make_config(2, hosts={"spark1": "127.0.0.1", "spark2": "127.0.0.2"}), tmp_path / "c.yaml", connect_timeout=3
    )
    exe = str(Path(sys.executable).parent / "sparktui")
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path))
    env.pop("PYTHONWARNINGS", None)
    runs = {
        "--help": ([exe, "--help"], 0),
        "a bad value": ([exe, "--config", str(cfg), "launch", "--timeout", "nan"], 2),
        "check --json": ([exe, "--config", str(cfg), "check", "--json"], None),
    }
    for what, (argv, want) in runs.items():
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
        if want is not None:
            assert r.returncode == want, (what, r.stderr[-1000:])
        noisy = [ln for ln in r.stderr.splitlines() if "Warning" in ln or "warnings.warn" in ln]
        assert not noisy, (what, noisy)
        if what == "check --json":
            import json

            json.loads(r.stdout)  # nothing else on stdout either
        if what != "a bad value":
            assert "Traceback" not in r.stderr, (what, r.stderr[-1000:])
