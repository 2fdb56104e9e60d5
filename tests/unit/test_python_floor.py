"""pyproject's requires-python is no lower than the code needs, so pip refuses an interpreter that cannot import it."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the modules that need the newest interpreter, what they need it for, and since which version
NEEDS = {"sparktui.core.diagnosis.quickre": ((3, 11), "re._parser and re._constants")}


def floor() -> tuple[int, int]:
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", spec)
    assert m, f"requires-python should be a plain floor such as '>=3.11', got {spec!r}"
    return int(m[1]), int(m[2])


def test_requires_python_is_no_lower_than_the_code_needs():
    for module, (need, what) in NEEDS.items():
        importlib.import_module(module)  # it imports here, on an interpreter at or above the floor
        assert floor() >= need, f"{module} needs Python {need[0]}.{need[1]} ({what}), requires-python says {floor()}"
