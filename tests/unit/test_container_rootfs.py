"""A simulated container's own /etc, /root and /run: an overlay where the kernel allows one, else the
machine's entries bound back into a directory of its own, ~/.ssh never among them."""

from __future__ import annotations

from sparktui.demo.docker import rootfs


class FakeLibc:
    """mount(2) as seen by rootfs.own: records each call; overlays fail as in a user namespace whose
    directory has mounts locked beneath it (EINVAL, "failed to clone lowerpath")."""

    def __init__(self, overlay_ok: bool):
        self.overlay_ok, self.calls = overlay_ok, []

    def mount(self, src, dst, fstype, flags, data):
        self.calls.append((src.decode(), dst.decode(), fstype.decode() if fstype else None))
        return 0 if fstype != b"overlay" or self.overlay_ok else -1


def machine_dir(tmp_path):
    target = tmp_path / "root"
    (target / ".ssh").mkdir(parents=True)
    (target / ".pyenv").mkdir()
    (target / "notes").write_text("x")
    return target


def test_an_overlay_takes_the_writes_where_the_kernel_allows_it(tmp_path):
    target, libc = machine_dir(tmp_path), FakeLibc(overlay_ok=True)
    rootfs.own(libc, str(target), str(tmp_path / "mine"))
    assert [c[2] for c in libc.calls] == ["overlay"]


def test_a_refused_overlay_binds_the_entries_back_but_never_ssh(tmp_path, monkeypatch):
    target, libc = machine_dir(tmp_path), FakeLibc(overlay_ok=False)
    monkeypatch.setitem(rootfs.NEVER_BOUND, str(target), (".ssh",))
    mine = tmp_path / "mine"
    rootfs.own(libc, str(target), str(mine))
    bound = {dst for src, dst, fstype in libc.calls if fstype is None}
    assert bound == {str(mine / ".pyenv"), str(mine / "notes"), str(target)}  # then mine over the target
    assert not (mine / ".ssh").exists()  # the container's own keys land in its own directory, not ours
