"""The semaphore trap: logind's RemoveIPC, read from the node in the look, judged against how the
engine container will run (its --user and --ipc, the image's USER)."""

from __future__ import annotations

import os
import subprocess

import pytest

from sparktui.core.config.config import DockerConfig
from sparktui.core.engines.common import Spot, docker_flags
from sparktui.core.preflight.ipc import SECTION, IpcLook, configured_remove_ipc, engine_identity, judge_ipc, parse_ipc
from sparktui.core.remote.ssh import script


def test_the_last_remove_ipc_in_systemd_order_wins():
    files = {
        "/etc/systemd/logind.conf": "[Login]\n#RemoveIPC=no\nRemoveIPC=yes\n",
        "/usr/lib/systemd/logind.conf.d/10-a.conf": "[Login]\nRemoveIPC=yes\n",
        "/etc/systemd/logind.conf.d/10-a.conf": "[Login]\nRemoveIPC=no\n",  # same name: /etc replaces /usr/lib
        "/run/systemd/logind.conf.d/05-b.conf": "[Login]\nRemoveIPC=yes\n",  # sorts first, so it loses
        "/etc/systemd/logind.conf.d/99-other.conf": "[Other]\nRemoveIPC=yes\n",  # not the [Login] section
    }
    assert configured_remove_ipc(files) is False
    assert configured_remove_ipc({"/etc/systemd/logind.conf": "[Login]\n#RemoveIPC=no\n"}) is None
    assert configured_remove_ipc({"/usr/lib/systemd/logind.conf": "[Login]\nRemoveIPC=off\n"}) is False


def test_the_effective_value_is_logind_s_own_then_the_files_then_yes():
    assert IpcLook().remove_ipc is True
    assert IpcLook(configured=False).remove_ipc is False
    assert IpcLook(live=True, configured=False).remove_ipc is True  # changed in the file, logind not restarted


@pytest.mark.parametrize(
    "words, want",
    [
        (["--network", "host", "--ipc", "host"], (None, "host")),
        (["--ipc", "host", "--user", "1000:1000"], ("1000:1000", "host")),
        (["--ipc", "host", "-u", "alice", "--ipc=private"], ("alice", "private")),
        (["--ipc", "host", "--user=0"], ("0", "host")),
        ([], (None, "private")),
    ],
)
def test_engine_identity_reads_the_last_user_and_ipc_flags(words, want):
    assert engine_identity(words) == want


def test_engine_identity_sees_the_user_set_through_extra_args_in_the_real_flags():
    spot = Spot(name="n", rank=0, role="head", iface=None, ip=None, rdma=None, infiniband=False)
    words = docker_flags(DockerConfig(extra_args=["--user", "1000"]), spot)
    assert engine_identity(words) == ("1000", "host")
    assert engine_identity(docker_flags(DockerConfig(), spot)) == (None, "host")


AT_RISK = IpcLook(uid=1000, user="alice", systemd=True, live=None, configured=None, linger=False)


@pytest.mark.parametrize(
    "look, user, image_user, ipc, risk",
    [
        (AT_RISK, "1000:1000", None, "host", True),
        (AT_RISK, "alice", None, "host", True),
        (AT_RISK, None, "alice", "host", True),  # the image's USER
        (AT_RISK, None, None, "host", False),  # root in the container: RemoveIPC never touches root
        (AT_RISK, None, "", "host", False),
        (AT_RISK, "998", None, "host", False),  # a system user
        (AT_RISK, "1001", None, "host", False),  # another user: sparktui's sessions do not end it
        (AT_RISK, "1000", None, "private", False),  # its own IPC namespace: logind cannot see it
        (IpcLook(uid=1000, user="alice", systemd=True, linger=True), "1000", None, "host", False),
        (IpcLook(uid=1000, user="alice", systemd=True, configured=False), "1000", None, "host", False),
        (IpcLook(uid=1000, user="alice", systemd=False), "1000", None, "host", False),
        (IpcLook(uid=0, user="root", systemd=True), "0", None, "host", False),
    ],
)
def test_judge_ipc_flags_only_the_engine_whose_objects_logind_would_remove(look, user, image_user, ipc, risk):
    r = judge_ipc("spark2", look, user, image_user, ipc)
    assert r.at_risk is risk, r.why
    if risk:
        assert "sudo loginctl enable-linger alice" in r.fix and "RemoveIPC=no" in r.fix and "spark2" in r.fix
        assert "SemLock._rebuild" in r.why
    else:
        assert r.fix == "" and r.why


def test_the_fix_quotes_the_user_name():
    look = IpcLook(uid=1000, user="a b;x", systemd=True)
    assert "enable-linger 'a b;x'" in judge_ipc("n", look, "1000", None, "host").fix


def _stub(bindir, name, body):
    p = bindir / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)


def _run_section(tmp_path, loginctl: str) -> IpcLook:
    root = tmp_path / "root"
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    _stub(bindir, "loginctl", loginctl)
    text = script(SECTION, root=str(root))
    out = subprocess.run(
        ["sh", "-c", text],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "@@ipc"
    return parse_ipc(lines[1:], str(root))


def test_the_section_reads_fake_files_under_a_real_sh(tmp_path):
    me = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    root = tmp_path / "root"
    (root / "etc/systemd/logind.conf.d").mkdir(parents=True)
    (root / "run/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/logind.conf").write_text("[Login]\n#RemoveIPC=yes\n")
    (root / "etc/systemd/logind.conf.d/50-keep ipc.conf").write_text("[Login]\nRemoveIPC=no\n")  # a space in the name
    look = _run_section(tmp_path, "exit 1")  # logind not reachable: the files decide
    assert look.uid == os.getuid() and look.user == me
    assert look.systemd is True and look.live is None and look.linger is False
    assert look.configured is False and look.remove_ipc is False

    (root / "etc/systemd/logind.conf.d/50-keep ipc.conf").unlink()
    (root / "var/lib/systemd/linger").mkdir(parents=True)
    (root / "var/lib/systemd/linger" / me).write_text("")
    look = _run_section(tmp_path, "echo yes")  # logind answers
    assert look.live is True and look.configured is None and look.linger is True
    assert look.remove_ipc is True


def test_the_section_says_no_systemd_on_an_empty_tree(tmp_path):
    look = _run_section(tmp_path, "exit 1")
    assert look.systemd is False and look.configured is None and look.linger is False
