"""Whether rsync runs on a node: "not installed" only when the lookup ran and found nothing."""

from __future__ import annotations

import subprocess

import pytest

from sparktui.core.remote.ssh import Result
from sparktui.core.transfers.errors import TransferError
from sparktui.core.transfers.model_sync import require_rsync
from tests.fakes import FakeNode


def through_sh(path: str):
    """A node whose shell is this machine's sh with the given PATH."""

    def answer(_name: str, command: str) -> Result:
        done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, env={"PATH": path})
        return Result(done.returncode, done.stdout, done.stderr, 0.0)

    return answer


async def test_a_node_without_rsync_is_told_to_install_it(tmp_path):
    with pytest.raises(TransferError, match=r"rsync is not installed on spark2; install it there"):
        await require_rsync(FakeNode("spark2", through_sh(str(tmp_path))), "spark2")


async def test_a_node_with_rsync_passes(tmp_path):
    (tmp_path / "rsync").write_text("#!/bin/sh\n")
    (tmp_path / "rsync").chmod(0o755)
    await require_rsync(FakeNode("spark2", through_sh(str(tmp_path))), "spark2")


async def test_a_lookup_that_fails_in_the_shell_says_the_shells_own_words():
    # what a node whose /dev/null cannot be written answered: the copy was refused as "not installed"
    err = "sh: 1: cannot create /dev/null: Permission denied\n"
    node = FakeNode("spark1", lambda *_: Result(2, "", err, 0.0))
    with pytest.raises(TransferError) as e:
        await require_rsync(node, "spark1 (the model's source)")
    assert str(e.value) == "cannot check for rsync on spark1: sh: 1: cannot create /dev/null: Permission denied"


async def test_an_unreachable_node_is_named_as_unreachable():
    node = FakeNode("spark1", lambda *_: Result(255, "", "connection refused", 0.0))
    with pytest.raises(TransferError, match=r"^spark1 \(the model's source\) is unreachable: connection refused$"):
        await require_rsync(node, "spark1 (the model's source)")
