"""tests/hermetic.py: each test and each in-process node has homes of its own, and a test that touches the
user's own sparktui files fails, as does the suite."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import asyncssh
import pytest

from sparktui.core.state.journal import default_journal_path
from sparktui.demo.sshserver import LocalSshServer
from tests import hermetic, userstate

REPO = Path(__file__).resolve().parents[2]

SAMPLE = """
import os
from pathlib import Path

from sparktui.core.state.journal import Journal, default_journal_path

USER = Path(os.environ["SAMPLE_USER_HOME"])


def test_uses_its_own_homes():
    j = Journal(default_journal_path())
    j.finish(j.start("n1", "true"), 0)
    (Path.home() / ".local/state/sparktui/transfers/t-1").mkdir(parents=True)
    (Path(os.environ["XDG_CONFIG_HOME"]) / "sparktui").mkdir(parents=True)
    assert default_journal_path().is_file()


def test_fills_the_contract_cache():
    cache = Path(os.environ["SPARKTUI_CONTRACT_CACHE"])
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "built").write_text("venv")


def test_appends_to_the_users_journal():
    if os.environ.get("SAMPLE_TOUCH"):
        with open(USER / ".local/state/sparktui/journal.jsonl", "a") as f:
            f.write("{}\\n")


def test_removes_a_users_transfer():
    if os.environ.get("SAMPLE_TOUCH"):
        os.remove(next((USER / ".local/state/sparktui/transfers").glob("*/rc")))
"""


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def run_sample(tmp_path: Path, home: Path, touch: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARKTUI_CONTRACT_CACHE", "SAMPLE_TOUCH", "CI")}
    env.update(HOME=str(home), SAMPLE_USER_HOME=str(home), PYTHONPATH=str(REPO))
    for name in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        env.pop(name, None)  # the user's defaults: under HOME
    if touch:
        env["SAMPLE_TOUCH"] = "1"
    # the suite's conftest as a plugin, as tests/lab/test_ci_rule.py loads it; the sample lives outside tests/
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "--basetemp",
            str(tmp_path / "basetemp"),
            str(tmp_path / "test_sample.py"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def user_home(tmp_path) -> Path:
    """A user's home holding 20 finished transfers, a deployment record and a 10 MB journal."""
    home = tmp_path / "user"
    userstate.fill(home)
    return home


def test_the_users_state_is_byte_identical_after_tests_that_write_state(tmp_path, user_home):
    before = tree_digest(user_home)
    assert sum(1 for k in before if k.endswith("/rc")) == 20 and any(k.endswith("qwen3.json") for k in before)
    assert (user_home / ".local/state/sparktui/journal.jsonl").stat().st_size >= 10 << 20
    r = run_sample(tmp_path, user_home, touch=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 passed" in r.stdout
    after = tree_digest(user_home)
    # the contract tier's cache is the one place the suite may write under the user's home
    assert after.pop(".cache/sparktui/contract/built") != "dir"
    assert {k: v for k, v in after.items() if not k.startswith(".cache")} == before


def test_a_test_that_touches_the_users_files_fails_naming_them(tmp_path, user_home):
    r = run_sample(tmp_path, user_home, touch=True)
    assert r.returncode == 1, r.stdout
    state = user_home / ".local/state/sparktui"
    assert "ERROR at teardown of test_appends_to_the_users_journal" in r.stdout
    assert f"changed {state / 'journal.jsonl'}" in r.stdout
    assert "ERROR at teardown of test_removes_a_users_transfer" in r.stdout
    assert f"removed {state / 'transfers'}/" in r.stdout
    assert "4 passed, 2 errors" in r.stdout  # each test ran; the guard fails it at its teardown
    # and the suite says so once more at the end, from the contents
    summary = r.stdout.split("user files touched", 1)[1].split("short test summary info", 1)[0]
    assert f"changed {state / 'journal.jsonl'}" in summary and "contract" not in summary


def test_the_session_check_sees_a_rewrite_that_keeps_size_and_time(tmp_path):
    home = tmp_path / "user"
    journal = home / ".local/state/sparktui/journal.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text("a" * 100)
    (home / ".cache/sparktui/contract").mkdir(parents=True)
    guard = hermetic.Guard(home, exempt=[home / hermetic.CONTRACT_CACHE])
    before = guard.digests()
    st = journal.stat()
    journal.write_text("b" * 100)
    os.utime(journal, ns=(st.st_atime_ns, st.st_mtime_ns))
    (home / ".cache/sparktui/contract/torch").mkdir()
    assert hermetic.changes(before, guard.digests()) == [f"changed {journal}"]


def test_a_test_has_homes_of_its_own(tmp_path):
    home = Path(os.environ["HOME"])
    assert home == tmp_path.with_name(tmp_path.name + "-homes") / "client" and home.is_dir()
    assert Path.home() == home and default_journal_path().is_relative_to(home)
    assert [os.environ[v] for v in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")] == [
        str(home / ".local/state"),
        str(home / ".config"),
        str(home / ".cache"),
    ]
    # the contract tier still finds its cache in the user's home, not in the sandbox
    assert not Path(os.environ["SPARKTUI_CONTRACT_CACHE"]).is_relative_to(home.parent)


def test_each_node_gets_a_home_unless_its_caller_gave_one(tmp_path):
    key = asyncssh.generate_private_key("ssh-ed25519")
    a, b = LocalSshServer(key, []), LocalSshServer(key, [], env={"FAKE": "1"})
    sandbox = tmp_path.with_name(tmp_path.name + "-homes")
    assert [a.env["HOME"], b.env["HOME"]] == [str(sandbox / "node1"), str(sandbox / "node2")]
    assert b.env["XDG_STATE_HOME"] == str(sandbox / "node2/.local/state") and b.env["FAKE"] == "1"
    given = LocalSshServer(key, [], env={"HOME": str(tmp_path / "n1"), "XDG_CACHE_HOME": "/c"})
    assert (given.env["HOME"], given.env["XDG_STATE_HOME"], given.env["XDG_CACHE_HOME"]) == (
        str(tmp_path / "n1"),
        str(tmp_path / "n1/.local/state"),
        "/c",
    )
    # a node whose caller built its whole environment (the demo's) is left as it is
    bare = LocalSshServer(key, [], env={"HOME": "/root"}, inherit_env=False)
    assert bare.env == {"HOME": "/root"}
