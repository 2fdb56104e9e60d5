"""The README is a front door: short, its test command is CI's, its minimal config loads, and the
configuration reference reproduces the example file itself."""

import re
from pathlib import Path

from sparktui.core.config.config import load_config_text

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250  # what a newcomer reads before the docs/ pages take over


def test_the_config_reference_reproduces_the_example_config_verbatim():
    example = (ROOT / "config.example.yaml").read_text().rstrip("\n")
    assert example in (ROOT / "docs" / "config.md").read_text()


def test_readme_names_the_test_command_that_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    [command] = re.findall(r"^TEST_CMD=\((.+?)\)", ci, re.M)
    assert command.startswith("python3 -m pytest -q")
    assert f"test command that `.ci/run` ends with is `{command}`" in " ".join(README.read_text().split())


def test_readme_stays_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES}): move detail to docs/"


def test_readmes_minimal_config_loads_as_written():
    section = README.read_text().split("\n## A minimal config", 1)[1]
    text = section.split("```yaml\n", 1)[1].split("\n```", 1)[0]
    cfg = load_config_text(text, "README.md")
    assert [n.name for n in cfg.nodes] == ["spark1", "spark2"] and cfg.head.name == "spark1"
    assert cfg.model.path == "/models/Qwen3.5-122B-A10B-FP8"
