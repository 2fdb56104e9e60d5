"""Write the screenshots (SVG) of the README and the user guide from the real app, driven by the recorded story.

    python3 tools/screenshots.py            # -> docs/screenshots/*.svg
    python3 tools/screenshots.py --check    # exit 1 if the committed ones differ from the app's

The app runs headless at 120x36 with the scripted core the TUI tests use (engine output recorded from
the simulator, node facts parsed from real probe samples), so the pictures are reproducible. The only
run-to-run difference in Textual's SVG is its id, a hash of the content; --check compares without it.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import html
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparktui.tui.app import SparkApp  # noqa: E402
from sparktui.tui.forms.launch_form import LaunchForm  # noqa: E402
from sparktui.tui.screens.confirm import ConfirmScreen  # noqa: E402
from tests.tui.conftest import settled_text, wait_for  # noqa: E402
from tests.tui.fake_core import ScriptedCore  # noqa: E402
from tests.tui.samples import spark_config, spark_facts  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
LIMIT = 120  # seconds any one step may take: generous for a loaded CI machine, and still bounded


async def render(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cfg = spark_config()
    app = SparkApp(cfg, controller=ScriptedCore(cfg, spark_facts()))
    app.animation_level = "none"

    async def shot(name: str) -> None:
        await settled_text(pilot, app, LIMIT)  # layout and refreshes caught up: the same picture every run
        app.save_screenshot(filename=f"{name}.svg", path=str(out))
        print(out / f"{name}.svg", file=sys.stderr)

    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="inventory", timeout=LIMIT)
        await shot("nodes")
        await pilot.press("t")
        await wait_for(pilot, lambda: "sync_model" not in app.running, what="sync", timeout=LIMIT)
        app.show_pane("pane-transfers")
        await shot("transfers")
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm), what="form", timeout=LIMIT)
        await shot("launch-form")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.deploy_state == "hung", what="hang", timeout=LIMIT)
        app.launch_pane.log.flush_now()
        await shot("hang")
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm", timeout=LIMIT)
        await shot("pivot-confirm")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.deploy_state == "ready", what="ready", timeout=LIMIT)
        app.launch_pane.log.flush_now()
        await shot("ready")


def normalise(svg: str) -> str:
    return re.sub(r"terminal-\d+", "terminal", svg)


def svg_text(svg: str) -> list[str]:
    """The screen's characters, line by line (Rich clips each text run to its line)."""
    lines: dict[int, str] = {}
    for m in re.finditer(r'<text [^>]*clip-path="url\(#terminal-\d+-line-(\d+)\)"[^>]*>(.*?)</text>', svg, re.S):
        lines[int(m[1])] = lines.get(int(m[1]), "") + html.unescape(m[2]).replace("\xa0", " ")
    return [lines[k].rstrip() for k in sorted(lines)]


def compare(committed: Path, fresh: Path) -> list[str]:
    """Problems between the committed pictures and freshly rendered ones; empty when they agree."""
    problems = []
    for new in sorted(fresh.glob("*.svg")):
        old = committed / new.name
        if not old.exists():
            problems.append(f"{old} is missing")
            continue
        a, b = old.read_text(), new.read_text()
        if normalise(a) != normalise(b):
            diff = list(difflib.unified_diff(svg_text(a), svg_text(b), "committed", "app", lineterm="", n=1))
            problems.append(
                f"{old} differs from the app" + (":\n" + "\n".join(diff[:40]) if diff else " (colours or styles only)")
            )
    return problems


def main() -> int:
    p = argparse.ArgumentParser(description="the docs' screenshots from the real app")
    p.add_argument("--check", action="store_true", help="compare with docs/screenshots instead of writing them")
    if not p.parse_args().check:
        asyncio.run(render(OUT))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(render(Path(tmp)))
        problems = compare(OUT, Path(tmp))
    for problem in problems:
        print(problem)
    if problems:
        print("docs/screenshots are out of date: run python3 tools/screenshots.py and commit the pictures")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
