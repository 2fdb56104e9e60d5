"""The README's and the user guide's pictures are the app as it is: docs/screenshots compared with a fresh rendering."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_screenshots_match_the_app():
    r = subprocess.run(
        [sys.executable, str(REPO / "tools" / "screenshots.py"), "--check"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert "out of date" not in r.stdout


def test_the_comparison_ignores_textuals_content_hash_and_shows_the_changed_text(tmp_path):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import screenshots
    finally:
        sys.path.remove(str(REPO / "tools"))
    svg = (REPO / "docs" / "screenshots" / "nodes.svg").read_text()
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "nodes.svg").write_text(svg)
    ids = set(re.findall(r"terminal-\d+", svg))
    assert len(ids) == 1
    (tmp_path / "new" / "nodes.svg").write_text(svg.replace(ids.pop(), "terminal-1"))
    assert screenshots.compare(tmp_path / "old", tmp_path / "new") == []
    assert any("spark1" in line for line in screenshots.svg_text(svg))
    changed = svg.replace("spark2", "sparkX", 1)
    (tmp_path / "new" / "nodes.svg").write_text(changed)
    (problem,) = screenshots.compare(tmp_path / "old", tmp_path / "new")
    assert "differs from the app" in problem and "sparkX" in problem
