"""The README's config reference is the example file itself, and its test command is CI's."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_reproduces_the_example_config_verbatim():
    example = (ROOT / "config.example.yaml").read_text().rstrip("\n")
    assert example in (ROOT / "README.md").read_text()


def test_readme_names_the_test_command_that_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "TEST_CMD=(python3 -m pytest -q)" in ci
    assert "python3 -m pytest -q" in (ROOT / "README.md").read_text()
