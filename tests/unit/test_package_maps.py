"""Every package of the core maps its modules in its docstring, and the map matches the tree.

The map is how a reader finds a module without opening the package: a module added without its line,
or a line left behind by a move, would send them to the wrong place.
"""

import ast
import re
from pathlib import Path

import pytest

import sparktui.core

CORE = Path(sparktui.core.__file__).parent
MAP_LINE = re.compile(r"^- `(\w+)` — \S")


def members(pkg: Path) -> set[str]:
    """The modules and subpackages a package holds."""
    mods = {p.stem for p in pkg.glob("*.py") if p.name != "__init__.py"}
    return mods | {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}


def mapped(pkg: Path) -> list[str]:
    """The names the package's docstring maps, one `- `name` — what it holds` line each."""
    doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text(encoding="utf-8"))) or ""
    return [m.group(1) for line in doc.splitlines() if (m := MAP_LINE.match(line))]


def map_faults(pkg: Path) -> list[str]:
    names = mapped(pkg)
    have = members(pkg)
    faults = [f"{n} is not in the map" for n in sorted(have - set(names))]
    faults += [f"the map names {n}, which is not there" for n in sorted(set(names) - have)]
    faults += [f"the map names {n} twice" for n in sorted({n for n in names if names.count(n) > 1})]
    return faults


PACKAGES = [CORE] + sorted(p.parent for p in CORE.rglob("__init__.py") if p.parent != CORE)


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: str(p.relative_to(CORE.parent)))
def test_package_map_matches_its_modules(pkg):
    assert map_faults(pkg) == [], f"{pkg.relative_to(CORE.parent.parent)}/__init__.py's map"


def test_core_has_packages_only():
    assert {p.stem for p in CORE.glob("*.py")} == {"__init__"}, "a core module belongs in one of its packages"


def test_a_missing_or_stale_line_is_named(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "kept.py").write_text("")
    (pkg / "new.py").write_text("")
    (pkg / "__init__.py").write_text(
        '"""What it is for.\n\n- `kept` — a module\n- `sub` — a package\n- `gone` — moved away\n"""\n'
    )
    assert map_faults(pkg) == ["new is not in the map", "the map names gone, which is not there"]
