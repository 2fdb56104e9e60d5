"""The core never imports the UI: importing every core module leaves textual unloaded."""

import pkgutil
import subprocess
import sys

import sparktui.core


def test_core_does_not_import_textual():
    mods = [m.name for m in pkgutil.walk_packages(sparktui.core.__path__, "sparktui.core.")]
    assert len(mods) > 5
    code = (
        "import importlib,sys\n"
        + "".join(f"importlib.import_module({m!r})\n" for m in mods)
        + "print(sorted(k for k in sys.modules if k.split('.')[0] in ('textual', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "textual" not in out, out
