"""Themes as data: YAML files turned into textual.theme.Theme.

Looked up in order (a later file with the same name wins): the files shipped inside the package
(theme_files/), then $XDG_CONFIG_HOME/sparktui/themes/ (default ~/.config/sparktui/themes/).
--theme and config.theme take a theme's name or the path of a YAML file.
"""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import yaml
from textual.theme import Theme

BUILTIN_DIR = Path(__file__).resolve().parent / "theme_files"
DEFAULT = "dark"
_FIELDS = {f.name for f in fields(Theme)}


class ThemeError(ValueError):
    """A theme file that cannot be used; str() names the file and what is wrong."""


def user_dir() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".config"
    return base / "sparktui" / "themes"


def load_theme(path: Path) -> Theme:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ThemeError(f"{path}: cannot read theme: {e}") from None
    if not isinstance(data, dict):
        raise ThemeError(f"{path}: a theme is a mapping of names to colours")
    data.setdefault("name", path.stem)
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ThemeError(f"{path}: unknown theme keys {', '.join(unknown)} (known: {', '.join(sorted(_FIELDS))})")
    if "primary" not in data:
        raise ThemeError(f"{path}: 'primary' colour missing")
    variables = data.get("variables") or {}
    data["variables"] = {str(k): str(v) for k, v in variables.items()}
    try:
        return Theme(**data)
    except (TypeError, ValueError) as e:
        raise ThemeError(f"{path}: {e}") from None


def theme_files(dirs: list[Path] | None = None) -> list[Path]:
    out: list[Path] = []
    for d in dirs if dirs is not None else [BUILTIN_DIR, user_dir()]:
        if d.is_dir():
            out += sorted(p for p in d.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    return out


def discover(dirs: list[Path] | None = None) -> tuple[dict[str, Theme], list[str]]:
    """name -> Theme from every theme directory; plus the problems with files that were skipped."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for p in theme_files(dirs):
        try:
            t = load_theme(p)
        except ThemeError as e:
            problems.append(str(e))
            continue
        themes[t.name] = t
    return themes, problems


def resolve(choice: str | None, themes: dict[str, Theme]) -> tuple[str, Theme | None]:
    """(name to activate, a Theme to register first when `choice` is a file path)."""
    if not choice:
        return DEFAULT, None
    if choice in themes:
        return choice, None
    p = Path(os.path.expanduser(choice))
    if p.suffix in (".yaml", ".yml") and p.is_file():
        t = load_theme(p)
        return t.name, t
    raise ThemeError(f"unknown theme {choice!r} (known: {', '.join(sorted(themes))}; or a .yaml file path)")
