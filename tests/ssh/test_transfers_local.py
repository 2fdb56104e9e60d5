"""Transfers end to end on simulated nodes: in-process SSH servers on 127.0.0.1, one HOME per node.

The nodes' own ssh (node to node) is a stand-in script that maps a "fabric" address to that node's
HOME and behaves like `ssh -o BatchMode=yes`: it refuses an unknown host key or a key missing from
authorized_keys. rsync is real; docker is a stand-in whose images are files. Nothing is dialled:
the fabric addresses below are only labels the stand-in looks up.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from sparktui.core.config.config import Config, ModelConfig, NodeConfig, SshConfig
from sparktui.core.state.events import TransferProgress
from sparktui.core.remote.ssh import Cluster
from sparktui.core.transfers import (
    TransferBusy,
    TransferError,
    TransferOptions,
    cancel_transfer,
    list_transfers,
    reattach,
    setup_trust,
    start_model_transfer,
    sync_image,
    sync_model,
    transfer_status,
    trust_plan,
    verify_model,
)
from sparktui.core.transfers.model_sync import inventory
from sparktui.core.transfers.trust import TrustPlan
from sparktui.demo.sshserver import LocalSshServer

pytestmark = pytest.mark.skipif(
    not shutil.which("rsync") or not shutil.which("ssh-keygen"), reason="needs rsync and ssh-keygen on this machine"
)

FAKE_SSH = r"""#!/bin/sh
user=
while [ $# -gt 0 ]; do
  case "$1" in
    -l) user=$2; shift 2 ;;
    -o|-p|-i|-F|-c|-m|-b|-e|-L|-R|-D|-J|-W) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: ssh host command" >&2; exit 255; }
case "$1" in *@*) user=${1%@*} ;; esac
host=${1#*@}; shift
home=$(awk -v h="$host" '$1 == h {print $2}' "$FAKE_SSH_MAP")
[ -n "$home" ] || { echo "ssh: connect to host $host port 22: No route to host" >&2; exit 255; }
ssh-keygen -F "$host" -f "$HOME/.ssh/known_hosts" >/dev/null 2>&1 || {
  echo "No ED25519 host key is known for $host and you have requested strict checking." >&2
  echo "Host key verification failed." >&2; exit 255; }
ok=
for k in "$HOME"/.ssh/id_*.pub; do
  [ -f "$k" ] || continue
  grep -qF "$(awk '{print $2}' "$k")" "$home/.ssh/authorized_keys" 2>/dev/null && ok=1
done
[ -n "$ok" ] || { echo "$user@$host: Permission denied (publickey)." >&2; exit 255; }
cd "$home" || exit 255
HOME=$home exec sh -c "$*"
"""

FAKE_KEYSCAN = r"""#!/bin/sh
for a in "$@"; do last=$a; done
awk -v h="$last" '$1 == h {found=1} END {exit !found}' "$FAKE_SSH_MAP" || exit 1
for f in /etc/ssh/ssh_host_*_key.pub; do [ -f "$f" ] && awk -v h="$last" '{print h, $1, $2}' "$f"; done
"""

# images are files: first line "NAME ID", then the layers (random bytes)
FAKE_DOCKER = r"""#!/bin/sh
store="$HOME/.docker-sim"; mkdir -p "$store"
key() { printf '%s' "$1" | tr '/:@' '___'; }
case "$1" in
  version) echo 24.0.7 ;;
  save)
    f="$store/$(key "$2").img"
    [ -f "$f" ] || { echo "Error response from daemon: reference does not exist" >&2; exit 1; }
    exec python3 -c 'import sys, time
f = open(sys.argv[1], "rb")
while True:
    c = f.read(1 << 20)
    if not c:
        break
    sys.stdout.buffer.write(c); sys.stdout.buffer.flush(); time.sleep(0.05)' "$f" ;;
  load)
    t="$store/load.$$"; cat > "$t"; read -r name id < "$t"
    [ -n "$id" ] || { echo "Error: unexpected EOF" >&2; rm -f "$t"; exit 1; }
    mv "$t" "$store/$(key "$name").img"; echo "Loaded image: $name" ;;
  image)
    f="$store/$(key "$5").img"
    [ -f "$f" ] || { echo "Error: No such image: $5" >&2; exit 1; }
    read -r name id < "$f"; echo "$id $(wc -c < "$f" | tr -d ' ')" ;;
  *) echo "fake docker: $*" >&2; exit 1 ;;
esac
"""

MODEL = "~/models/m"


@dataclass
class Env:
    config: Config
    homes: dict[str, Path]
    addrs: dict[str, str]
    opts: TransferOptions
    servers: list[LocalSshServer]

    def model_dir(self, node: str) -> Path:
        return self.homes[node] / "models" / "m"


def _keygen(home: Path) -> str:
    (home / ".ssh").mkdir(parents=True, exist_ok=True, mode=0o700)
    key = home / ".ssh" / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return (home / ".ssh" / "id_ed25519.pub").read_text().strip()


def trust_by_hand(env: Env, src: str, dst: str) -> None:
    """What an admin would do: src's key in dst's authorized_keys, dst's host key in src's known_hosts."""
    pub = _keygen(env.homes[src])
    ak = env.homes[dst] / ".ssh" / "authorized_keys"
    ak.parent.mkdir(parents=True, exist_ok=True)
    with ak.open("a") as f:
        f.write(pub + "\n")
    hostkey = next(Path("/etc/ssh").glob("ssh_host_*_key.pub")).read_text().split()
    with (env.homes[src] / ".ssh" / "known_hosts").open("a") as f:
        f.write(f"{env.addrs[dst]} {hostkey[0]} {hostkey[1]}\n")


@pytest.fixture(scope="module")
def client_key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


@pytest.fixture
async def make_env(tmp_path: Path, client_key):
    servers: list[LocalSshServer] = []
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("fake-ssh", FAKE_SSH), ("ssh-keyscan", FAKE_KEYSCAN), ("docker", FAKE_DOCKER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)

    async def make(n: int = 2, trust: bool = True) -> Env:
        key_path = tmp_path / "client_key"
        key_path.write_bytes(client_key.export_private_key())
        key_path.chmod(0o600)
        kh = tmp_path / "known_hosts"
        names = [f"n{i + 1}" for i in range(n)]
        homes = {nm: tmp_path / "nodes" / nm for nm in names}
        addrs = {nm: f"127.0.0.{11 + i}" for i, nm in enumerate(names)}  # labels only, never dialled
        (tmp_path / "ssh-map").write_text("".join(f"{addrs[nm]} {homes[nm]}\n" for nm in names))
        nodes = []
        for i, nm in enumerate(names):
            homes[nm].mkdir(parents=True)
            hk = asyncssh.generate_private_key("ssh-ed25519")
            env = {
                "HOME": str(homes[nm]),
                "PATH": f"{bin_dir}:{os.environ['PATH']}",
                "FAKE_SSH_MAP": str(tmp_path / "ssh-map"),
            }
            srv = await LocalSshServer(hk, [client_key], env=env, cwd=homes[nm]).start()
            servers.append(srv)
            with kh.open("a") as f:
                f.write(f"[127.0.0.1]:{srv.port} {hk.export_public_key('openssh').decode()}")
            nodes.append(
                NodeConfig(
                    name=nm,
                    host="127.0.0.1",
                    port=srv.port,
                    user="root",
                    identity_file=str(key_path),
                    role="head" if i == 0 else "worker",
                )
            )
        cfg = Config(
            cluster="t",
            nodes=nodes,
            model=ModelConfig(name="m", path=MODEL),
            ssh=SshConfig(known_hosts=str(kh), connect_timeout=5, ssh_config=[]),
        )
        opts = TransferOptions(ssh=str(bin_dir / "fake-ssh"), poll=0.1, connect_timeout=2, lost_contact=20)
        e = Env(cfg, homes, addrs, opts, servers)
        if trust:
            for s in names:
                for d in names:
                    if s != d:
                        trust_by_hand(e, s, d)
        return e

    yield make
    for s in servers:
        await s.stop()
    # detached jobs of a failed test must not outlive it
    subprocess.run(
        [
            "sh",
            "-c",
            f"for p in {tmp_path}/nodes/*/.local/state/sparktui/transfers/*/pid; do "
            '[ -f "$p" ] && kill -KILL -"$(cat "$p")" 2>/dev/null; done; true',
        ],
        check=False,
    )


def write_model(d: Path, sizes: list[int]) -> None:
    d.mkdir(parents=True)
    (d / "sub").mkdir()
    for i, size in enumerate(sizes):
        (d / ("sub" if i == 0 else ".") / f"part-{i}.safetensors").write_bytes(os.urandom(size))
    (d / "config.json").write_text('{"model_type": "test"}')


def same_tree(a: Path, b: Path) -> bool:
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return fa == fb and all((a / p).read_bytes() == (b / p).read_bytes() for p in fa)


async def until(cond, timeout: float, what: str) -> None:
    """Wait for a condition, at most `timeout` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


MB = 1 << 20


async def test_model_sync_progress_rises_and_verifies(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [6 * MB, 6 * MB, 3 * MB])
    env.opts.bwlimit = "6m"  # a few seconds: several progress reads
    events: list[TransferProgress] = []
    async with Cluster(env.config) as c:
        outs = await asyncio.wait_for(sync_model(c, env.config, emit=events.append, opts=env.opts, addrs=env.addrs), 60)
        status = await transfer_status(c, env.config)
    assert [(o.dest, o.ok, o.source) for o in outs] == [("n2", True, "n1")]
    assert same_tree(env.model_dir("n1"), env.model_dir("n2"))
    running = [e for e in events if e.state == "running" and e.bytes]
    assert len({e.bytes for e in running}) >= 3, "progress should be seen moving"
    assert [e.bytes for e in running] == sorted(e.bytes for e in running)
    assert running[-1].percent == 100.0 or events[-1].percent == 100.0
    assert events[-1].state == "done" and "4 files" in events[-1].message  # 3 parts + config.json
    [st] = status
    assert st["state"] == "done" and st["verified"]["ok"] and st["dest"] == "n2"


async def test_killed_follower_reattaches_and_the_copy_runs_once(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [8 * MB, 8 * MB])
    env.opts.bwlimit = "5m"
    events: list[TransferProgress] = []
    async with Cluster(env.config) as c:
        task = asyncio.ensure_future(sync_model(c, env.config, emit=events.append, opts=env.opts, addrs=env.addrs))
        await until(lambda: any(e.state == "running" and e.bytes > 0 for e in events), 30, "first progress")
        task.cancel()  # sparktui goes away; the rsync on n1 does not
        with pytest.raises(asyncio.CancelledError):
            await task
    async with Cluster(env.config) as c2:  # a new sparktui
        [rec] = await list_transfers(c2)
        assert rec.state == "running" and rec.meta.dest == "n2"
        with pytest.raises(TransferBusy):
            await start_model_transfer(c2, "n1", "n2", MODEL, env.addrs["n2"], "root", env.opts)
        again: list[TransferProgress] = []
        outs = await asyncio.wait_for(sync_model(c2, env.config, emit=again.append, opts=env.opts, addrs=env.addrs), 60)
        recs = await list_transfers(c2)
    assert outs[0].ok and outs[0].id == rec.id
    assert "already running" in again[0].message
    assert [r.id for r in recs] == [rec.id] and recs[0].state == "done"
    assert same_tree(env.model_dir("n1"), env.model_dir("n2"))


async def test_cancel_keeps_partial_files_and_the_next_sync_resumes(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [12 * MB])
    env.opts.bwlimit = "3m"
    events: list[TransferProgress] = []
    async with Cluster(env.config) as c:
        task = asyncio.ensure_future(sync_model(c, env.config, emit=events.append, opts=env.opts, addrs=env.addrs))
        await until(lambda: any(e.state == "running" and e.bytes > 2 * MB for e in events), 30, "2 MB copied")
        tid = next(e.id for e in events if e.state == "running")
        said = await cancel_transfer(c, tid)
        outs = await asyncio.wait_for(task, 30)
        partial = env.model_dir("n2") / "sub" / "part-0.safetensors"
        kept = partial.stat().st_size if partial.exists() else 0
        [rec] = await list_transfers(c)
        cut = await inventory(c["n2"], MODEL)
        env.opts.bwlimit = None
        outs2 = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 60)
        whole = await inventory(c["n2"], MODEL)
    assert "stopped" in said and rec.state == "cancelled"
    assert not outs[0].ok and "cancelled" in outs[0].message
    assert kept > 0, "the partial file should stay for the resume"
    assert tid in cut["incomplete"] and "from n1" in cut["incomplete"]  # the cut-off copy is marked
    assert outs2[0].ok and whole["incomplete"] is None  # the resumed copy is verified and unmarked
    assert same_tree(env.model_dir("n1"), env.model_dir("n2"))  # the mark is gone, nothing else added


async def test_verification_compares_every_file_size_not_only_the_totals(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [MB, MB])
    async with Cluster(env.config) as c:
        [out] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 30)
        assert out.ok, out.message
        # one shard cut short, another grown by as much: same file count, same total bytes
        a, b = env.model_dir("n2") / "sub" / "part-0.safetensors", env.model_dir("n2") / "part-1.safetensors"
        a.write_bytes(a.read_bytes()[:-4096])
        b.write_bytes(b.read_bytes() + b"x" * 4096)
        [rec] = await list_transfers(c)
        v = await verify_model(c, rec.meta, env.opts)
    assert v["source"]["bytes"] == v["dest"]["bytes"] and v["source"]["files"] == v["dest"]["files"]
    assert not v["ok"]
    assert "2 file(s) differ in size" in v["message"] and "sub/part-0.safetensors" in v["message"]


async def test_a_hugging_face_snapshot_arrives_as_files_and_verifies_by_their_sizes(make_env):
    env = await make_env(2)
    blobs = env.homes["n1"] / "hub" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "3fa2").write_bytes(os.urandom(MB))
    (blobs / "c0de").write_text('{"model_type": "test"}')
    snap = env.model_dir("n1")
    snap.mkdir(parents=True)
    (snap / "model.safetensors").symlink_to("../../hub/blobs/3fa2")  # as huggingface_hub lays a snapshot out
    (snap / "config.json").symlink_to("../../hub/blobs/c0de")
    async with Cluster(env.config) as c:
        [out] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 30)
    assert out.ok, out.message
    got = env.model_dir("n2") / "model.safetensors"
    assert not got.is_symlink() and got.read_bytes() == (blobs / "3fa2").read_bytes()
    assert "2 files" in out.message


async def test_an_incomplete_source_copy_is_not_spread(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [MB])
    (env.model_dir("n1") / ".sparktui-incomplete").write_text("copy model-n1-x from n9 started earlier\n")
    async with Cluster(env.config) as c:
        with pytest.raises(TransferError, match="incomplete .copy model-n1-x from n9"):
            await sync_model(c, env.config, opts=env.opts, addrs=env.addrs)
    assert not env.model_dir("n2").exists()


async def test_fan_out_uses_a_finished_node_as_second_source(make_env):
    env = await make_env(3)
    write_model(env.model_dir("n1"), [2 * MB, MB])
    env.opts.streams_per_source = 1
    async with Cluster(env.config) as c:
        outs = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 60)
    by_dest = {o.dest: o for o in outs}
    assert by_dest["n2"].ok and by_dest["n3"].ok
    assert (by_dest["n2"].source, by_dest["n3"].source) == ("n1", "n2")
    assert same_tree(env.model_dir("n1"), env.model_dir("n3"))


async def test_missing_source_directory_is_a_clear_error(make_env):
    env = await make_env(2)
    async with Cluster(env.config) as c:
        with pytest.raises(TransferError, match=r"model directory ~/models/m not found on n1"):
            await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 20)


async def test_missing_trust_fails_fast_with_instructions_and_setup_fixes_it(make_env):
    env = await make_env(2, trust=False)
    write_model(env.model_dir("n1"), [MB])
    async with Cluster(env.config) as c:
        [out] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 20)
        assert not out.ok
        assert "n1 cannot log in to n2" in out.message and "sparktui setup trust" in out.message
        assert not env.model_dir("n2").exists() or not any(env.model_dir("n2").iterdir())
        plan = await trust_plan(c, env.config, addrs=env.addrs)
        steps = await setup_trust(c, plan, env.opts)
        assert all(s.ok for s in steps), [s.what for s in steps if not s.ok]
        assert any("created a new ed25519 key" in s.what for s in steps)
        assert sum("without a prompt" in s.what for s in steps) == 2  # n1->n2 and n2->n1
        again = await setup_trust(c, plan, env.opts)  # idempotent
        [out2] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 30)
    assert all(s.ok for s in again) and not any("created" in s.what for s in again)
    assert (env.homes["n2"] / ".ssh" / "authorized_keys").read_text().count("ssh-ed25519") == 1
    assert out2.ok


async def test_setup_trust_replaces_a_stale_host_key_only_when_the_peer_proves_it(make_env):
    env = await make_env(2, trust=False)
    _keygen(env.homes["n1"])
    stale = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().split()
    kh = env.homes["n1"] / ".ssh" / "known_hosts"
    kh.write_text(f"{env.addrs['n2']} {stale[0]} {stale[1]}\n")
    async with Cluster(env.config) as c:
        steps = await setup_trust(c, TrustPlan([("n1", "n2")], env.addrs), env.opts)
    assert all(s.ok for s in steps), [s.what for s in steps]
    assert any("replaced a stale host key" in s.what for s in steps)
    assert stale[1] not in kh.read_text()


async def test_image_sync_skips_equal_ids_and_ends_with_equal_ids(make_env):
    env = await make_env(3)
    img = env.config.images.sglang  # "sglang" below resolves to the config's image
    f = img.translate(str.maketrans("/:@", "___")) + ".img"
    store = {n: env.homes[n] / ".docker-sim" for n in env.homes}
    for s in store.values():
        s.mkdir()
    payload = os.urandom(12 * MB)
    (store["n1"] / f).write_bytes(img.encode() + b" sha256:aaa\n" + payload)
    (store["n3"] / f).write_bytes(img.encode() + b" sha256:old\n" + b"x")
    events: list[TransferProgress] = []
    async with Cluster(env.config) as c:
        outs = await asyncio.wait_for(
            sync_image(c, env.config, "sglang", emit=events.append, opts=env.opts, addrs=env.addrs), 60
        )
        outs2 = await asyncio.wait_for(sync_image(c, env.config, img, opts=env.opts, addrs=env.addrs), 30)
    by = {o.dest: o for o in outs}
    assert by["n1"].ok and by["n1"].id is None and "already has" in by["n1"].message
    assert by["n2"].ok and by["n3"].ok and "sha256:aaa" in by["n3"].message
    for n in ("n2", "n3"):
        assert (store[n] / f).read_bytes().startswith(img.encode() + b" sha256:aaa")
    moving = [e.bytes for e in events if e.state == "running" and e.dest == "n2" and e.bytes]
    assert len(set(moving)) >= 2 and moving == sorted(moving)
    assert all(o.ok and o.id is None for o in outs2)  # everyone has it now: nothing moves


async def test_image_on_no_node_is_a_clear_error(make_env):
    env = await make_env(2)
    async with Cluster(env.config) as c:
        with pytest.raises(TransferError, match="no node has the image nope:1"):
            await sync_image(c, env.config, "nope:1", opts=env.opts, addrs=env.addrs)


async def test_started_without_waiting_then_reattached_on_start(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [4 * MB, 4 * MB])
    env.opts.bwlimit = "8m"
    async with Cluster(env.config) as c:
        [started] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs, wait=False), 30)
        assert started.ok and started.message.startswith("started")
        [again] = await sync_model(c, env.config, opts=env.opts, addrs=env.addrs, wait=False)
        assert again.id == started.id and "already running" in again.message  # not a second rsync
    events: list[TransferProgress] = []
    async with Cluster(env.config) as c2:  # the TUI opening later
        [out] = await asyncio.wait_for(reattach(c2, events.append, env.opts), 60)
        shown = await asyncio.wait_for(reattach(c2, events.append, env.opts), 30)
    assert out.ok and out.id == started.id
    assert events[0].id == started.id and events[0].state == "running"
    assert [e.state for e in events if e.id == started.id].count("done") == 2  # verified, then shown again
    assert shown == []  # nothing left to carry on


async def test_checksum_pass_catches_what_sizes_and_times_miss(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [MB])
    async with Cluster(env.config) as c:
        [out] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 30)
        assert out.ok
        f = env.model_dir("n2") / "sub" / "part-0.safetensors"
        st = f.stat()
        data = bytearray(f.read_bytes())
        data[1000] ^= 0xFF  # same size, same mtime: rsync's quick check and the counts see nothing
        f.write_bytes(bytes(data))
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        [rec] = await list_transfers(c)
        plain = await verify_model(c, rec.meta, env.opts)
        env.opts.checksum = True
        deep = await verify_model(c, rec.meta, env.opts)
    assert plain["ok"] and not plain["checksum"]
    assert not deep["ok"] and deep["checksum"] and "sub/part-0.safetensors" in deep["message"]


async def test_following_survives_a_dropped_connection_to_the_source(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [6 * MB])
    env.opts.bwlimit = "3m"
    events: list[TransferProgress] = []
    async with Cluster(env.config) as c:
        task = asyncio.ensure_future(sync_model(c, env.config, emit=events.append, opts=env.opts, addrs=env.addrs))
        await until(lambda: any(e.state == "running" and e.bytes > MB for e in events), 30, "1 MB copied")
        env.servers[0].drop_connections()  # n1's link to sparktui breaks; the copy on n1 goes on
        [out] = await asyncio.wait_for(task, 60)
    assert out.ok, out.message
    assert same_tree(env.model_dir("n1"), env.model_dir("n2"))


async def test_paths_with_spaces_and_quotes_reach_the_shell_as_data(make_env):
    env = await make_env(2)
    env.config.model.path = '~/models/it\'s a "model" $(touch pwned) ; x'
    src = env.homes["n1"] / "models" / 'it\'s a "model" $(touch pwned) ; x'
    write_model(src, [MB])
    async with Cluster(env.config) as c:
        [out] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 30)
    assert out.ok, out.message
    assert same_tree(src, env.homes["n2"] / "models" / 'it\'s a "model" $(touch pwned) ; x')
    assert not any(p.name == "pwned" for h in env.homes.values() for p in h.rglob("pwned"))


async def test_unreachable_destination_is_named_and_the_others_still_get_their_copy(make_env):
    env = await make_env(3)
    write_model(env.model_dir("n1"), [MB])
    await env.servers[2].stop()  # n3 is down
    async with Cluster(env.config) as c:
        outs = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 60)
    by = {o.dest: o for o in outs}
    assert by["n2"].ok
    assert not by["n3"].ok and by["n3"].message.startswith("n3 is unreachable")
