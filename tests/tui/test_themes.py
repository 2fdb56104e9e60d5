"""Themes are data: shipped in the package, found in the user's config dir, chosen by name or file."""

from __future__ import annotations

from pathlib import Path

import pytest

import sparktui
from sparktui.cli import main
from sparktui.tui import theming
from sparktui.tui.app import SparkApp

from .conftest import wait_for
from .fake_core import ScriptedCore
from .samples import spark_config, spark_facts

REPO = Path(__file__).resolve().parents[2]


def test_three_themes_ship_inside_the_package():
    themes, problems = theming.discover([theming.BUILTIN_DIR])
    assert problems == []
    assert {"dark", "light", "high-contrast"} <= set(themes)
    assert themes["light"].dark is False and themes["dark"].dark is True
    pkg = Path(sparktui.__file__).resolve().parent
    assert theming.BUILTIN_DIR.is_relative_to(pkg)  # package data, so an installed sparktui has them
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"**/*.yaml"' in pyproject  # ...and the build includes them


def test_the_package_holds_the_only_copy_of_the_themes():
    # a second copy outside the package would drift from what ships (nothing reads one)
    assert not (REPO / "themes").exists()
    assert {p.name for p in theming.BUILTIN_DIR.glob("*.yaml")} == {"dark.yaml", "light.yaml", "high-contrast.yaml"}


def test_user_theme_dir_is_searched_and_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    d = tmp_path / "sparktui" / "themes"
    d.mkdir(parents=True)
    (d / "mine.yaml").write_text("primary: '#ff00ff'\nbackground: '#101010'\n")
    (d / "light.yaml").write_text("name: light\nprimary: '#123456'\ndark: false\n")
    (d / "broken.yaml").write_text("primary: [unclosed\n")
    (d / "typo.yaml").write_text("primry: '#fff'\n")
    themes, problems = theming.discover()
    assert themes["mine"].primary == "#ff00ff"  # the name defaults to the file's stem
    assert themes["light"].primary == "#123456"  # the user's file replaces the shipped one
    assert len(problems) == 2 and any("broken.yaml" in p for p in problems)
    assert any("unknown theme keys primry" in p for p in problems)


def test_resolve_by_name_file_or_error(tmp_path):
    themes, _ = theming.discover([theming.BUILTIN_DIR])
    assert theming.resolve(None, themes) == ("dark", None)
    assert theming.resolve("light", themes) == ("light", None)
    f = tmp_path / "ocean.yaml"
    f.write_text("primary: '#0077be'\n")
    name, extra = theming.resolve(str(f), themes)
    assert name == "ocean" and extra is not None and extra.primary == "#0077be"
    with pytest.raises(theming.ThemeError, match="unknown theme 'nope'"):
        theming.resolve("nope", themes)


@pytest.mark.parametrize("choice", ["dark", "light", "high-contrast"])
async def test_app_applies_the_theme(choice, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    cfg = spark_config()
    app = SparkApp(cfg, theme=choice, controller=ScriptedCore(cfg, spark_facts()))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        assert app.theme == choice
        bg = app.screen.styles.background
        expected = theming.discover()[0][choice].background
        assert bg.hex.lower() == expected.lower()


async def test_config_theme_and_a_bad_choice(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    cfg = spark_config(theme="light")
    app = SparkApp(cfg, controller=ScriptedCore(cfg, spark_facts()))
    async with app.run_test(size=(80, 24)):
        assert app.theme == "light"
    app = SparkApp(cfg, theme="nope", controller=ScriptedCore(cfg, spark_facts()))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "dark"
        assert any("unknown theme 'nope'" in n.message for n in app._notifications)


def test_cli_refuses_an_unknown_theme(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    cfg = tmp_path / "c.yaml"
    cfg.write_text("cluster: c\nnodes:\n  - {name: a, host: 127.0.0.1}\nmodel: {name: m, path: /m}\n")
    assert main(["--config", str(cfg), "--theme", "nope"]) == 2
    assert "unknown theme 'nope'" in capsys.readouterr().err
