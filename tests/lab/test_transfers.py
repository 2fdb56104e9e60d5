"""Transfers on lab nodes: real rsync and docker save | load over the fabric between namespaces,
each node with its own sshd, dockerd, /models and /root/.ssh."""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sparktui.core.config.config import load_config
from sparktui.core.state.events import TransferProgress
from sparktui.core.remote.ssh import Cluster
from sparktui.core.transfers import (
    TransferError,
    TransferOptions,
    list_transfers,
    start_model_transfer,
    sync_image,
    sync_model,
)
from sparktui.core.transfers.follow import follow

from . import tinyimage
from .labtools import REPO, STATE, cli, make_model, sums, wait_for
from .netlab import Lab

pytestmark = pytest.mark.lab


def config_for(lab: Lab, model_path: str) -> Path:
    data = lab.config_data()
    data["model"]["path"] = model_path
    return lab.write_config(data)


def forget(lab: Lab, path: str, nodes: list[str] | None = None) -> None:
    """Stop and remove this test's transfers and model copies."""
    lab.on_each(
        f'for m in {STATE}/*/meta.json; do [ -f "$m" ] || continue; grep -qF {shlex.quote(json.dumps(path))} "$m" '
        f'|| continue; d=${{m%/meta.json}}; p=$(cat "$d/pid" 2>/dev/null); [ -z "$p" ] || kill -KILL -"$p" '
        f'2>/dev/null; rm -rf "$d"; done; rm -rf {shlex.quote(path)}',
        nodes=nodes,
        check=False,
    )


@pytest.fixture
def model_path(lab):
    path = f"/models/xfer-{uuid.uuid4().hex[:8]}"
    yield path
    forget(lab, path)


async def test_model_rsync_over_the_fabric_rises_to_100_and_verifies(lab, model_path):
    lab.trust("node1", "node2")
    make_model(lab, "node1", model_path, shards="shards", sizes_mb=[64, 64, 48, 24])  # 200 MB
    cfg = load_config(config_for(lab, model_path))
    events: list[TransferProgress] = []
    opts = TransferOptions(poll=0.3, bwlimit="40m")  # ~5 s: several updates to watch
    async with Cluster(cfg) as c:
        outs = await asyncio.wait_for(sync_model(c, cfg, emit=events.append, opts=opts), 120)
        [rec] = [r for r in await list_transfers(c) if r.meta.path == model_path]
    [out] = outs
    assert out.ok, out.message
    assert rec.meta.addr == lab["node2"].fabric_ip  # over the fabric, not the management or wlan subnet
    running = [e for e in events if e.state == "running" and e.bytes]
    assert len({e.percent for e in running}) >= 3
    assert [e.bytes for e in running] == sorted(e.bytes for e in running)
    assert max(e.percent for e in running) == 100.0
    assert events[-1].state == "done" and "5 files" in events[-1].message
    assert sums(lab, "node1", model_path) == sums(lab, "node2", model_path)
    assert rec.state == "done" and rec.verified["ok"]


async def test_image_transfer_ends_with_equal_ids(lab):
    tag = f"sparktui/xfer-{uuid.uuid4().hex[:8]}:latest"
    tar = Path(lab.dir) / "xfer-rootfs.tar"
    if not tar.exists():
        tinyimage.build(tar)
    lab.trust("node1", "node2")
    lab.import_image(tar, tag, ["node1"])
    lab.import_image(tar, tag, ["node2"])  # a separate import: same name, a different ID (stale copy)
    cfg = load_config(config_for(lab, "/models/none"))
    events: list[TransferProgress] = []
    try:
        ids0 = {
            n: lab.sh(n, f"docker image inspect --format '{{{{.Id}}}}' {tag}").stdout.strip()
            for n in ("node1", "node2")
        }
        assert ids0["node1"] != ids0["node2"]
        async with Cluster(cfg) as c:
            outs = await asyncio.wait_for(
                sync_image(c, cfg, tag, emit=events.append, opts=TransferOptions(poll=0.2)), 180
            )
            again = await asyncio.wait_for(sync_image(c, cfg, tag, opts=TransferOptions(poll=0.2)), 60)
        ids = {
            n: lab.sh(n, f"docker image inspect --format '{{{{.Id}}}}' {tag}").stdout.strip()
            for n in ("node1", "node2")
        }
        by = {o.dest: o for o in outs}
        assert by["node1"].ok and by["node1"].id is None  # the source: nothing to do
        assert by["node2"].ok, by["node2"].message
        assert ids["node2"] == ids["node1"] == ids0["node1"]
        assert any(e.state == "running" and e.dest == "node2" for e in events)
        assert all(o.ok and o.id is None and "already has" in o.message for o in again)
    finally:
        lab.on_each(f"docker rmi -f {tag} >/dev/null 2>&1; true", check=False)


def test_killed_cli_reattaches_and_the_copy_completes_once(lab, model_path):
    lab.trust("node1", "node2")
    make_model(lab, "node1", model_path, shards="shards", sizes_mb=[64, 64, 64])
    cfg = config_for(lab, model_path)
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparktui",
            "--config",
            str(cfg),
            "sync",
            "model",
            "--wait",
            "--json",
            "--bwlimit",
            "16m",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        progress = (
            f'for l in {STATE}/*/log; do grep -qF {shlex.quote(model_path)} "${{l%/log}}/meta.json" '
            f"&& tr '\\r' '\\n' < \"$l\" | grep -c '%' ; done"
        )

        def moving():
            r = lab.sh("node1", progress, check=False)
            return r.stdout.strip().isdigit() and int(r.stdout.strip()) >= 2

        wait_for(moving, 60, "rsync progress on node1")
    finally:
        first.send_signal(signal.SIGKILL)  # sparktui dies; the copy on node1 must not
        first.communicate(timeout=30)
    listing = cli(cfg, "sync", "status", "--json")
    running = [t for t in json.loads(listing.stdout)["transfers"] if t["path"] == model_path]
    assert [t["state"] for t in running] == ["running"], listing.stdout
    tid = running[0]["id"]
    second = cli(cfg, "sync", "model", "--wait", "--json", timeout=240)
    assert second.returncode == 0, second.stderr + second.stdout
    [out] = json.loads(second.stdout)
    assert out["ok"] and out["id"] == tid  # followed, not started again
    after = json.loads(cli(cfg, "sync", "status", "--json").stdout)["transfers"]
    mine = [t for t in after if t["path"] == model_path]
    assert [(t["id"], t["state"]) for t in mine] == [(tid, "done")]
    assert sums(lab, "node1", model_path) == sums(lab, "node2", model_path)


async def test_three_nodes_fan_out_through_a_finished_node(lab3):
    path = f"/models/xfer-{uuid.uuid4().hex[:8]}"
    for a in ("node1", "node2", "node3"):
        for b in ("node1", "node2", "node3"):
            if a != b:
                lab3.trust(a, b)
    make_model(lab3, "node1", path, shards="shards", sizes_mb=[16, 8])
    cfg = load_config(config_for(lab3, path))
    try:
        async with Cluster(cfg) as c:
            outs = await asyncio.wait_for(sync_model(c, cfg, opts=TransferOptions(poll=0.2, streams_per_source=1)), 180)
        by = {o.dest: o for o in outs}
        assert by["node2"].ok and by["node3"].ok, [o.message for o in outs]
        assert (by["node2"].source, by["node3"].source) == ("node1", "node2")
        assert sums(lab3, "node3", path) == sums(lab3, "node1", path)
        meta = lab3.sh("node2", f"cat {STATE}/{by['node3'].id}/meta.json").stdout
        assert json.loads(meta)["addr"] == lab3["node3"].fabric_ip
    finally:
        forget(lab3, path)


async def test_missing_source_directory_says_so(lab):
    cfg = load_config(config_for(lab, "/models/does-not-exist"))
    async with Cluster(cfg) as c:
        with pytest.raises(TransferError, match="model directory /models/does-not-exist not found on node1"):
            await asyncio.wait_for(sync_model(c, cfg), 60)


async def test_full_destination_disk_is_refused_up_front_and_reported_by_rsync(lab, model_path):
    lab.trust("node1", "node2")
    make_model(lab, "node1", model_path, shards="shards", sizes_mb=[24, 24])
    lab.mount_tmpfs("node2", model_path, "16m")
    cfg = load_config(config_for(lab, model_path))
    try:
        async with Cluster(cfg) as c:
            [out] = await asyncio.wait_for(sync_model(c, cfg), 60)
            assert not out.ok and "not enough space on node2" in out.message
            # past the check (the disk filled up meanwhile): rsync's own complaint comes through
            opts = TransferOptions(poll=0.2)
            meta = await start_model_transfer(c, "node1", "node2", model_path, lab["node2"].fabric_ip, "root", opts)
            ended = await asyncio.wait_for(follow(c["node1"], meta, None, opts), 60)
        assert ended.rc not in (None, 0) and ended.state == "failed"
        assert "No space left on device" in ended.message
    finally:
        lab.umount("node2", model_path)


def test_missing_trust_is_a_clear_error_and_setup_trust_fixes_it(lab, model_path):
    lab.untrust("node1", "node2")
    lab.sh("node1", f"ssh-keygen -R {lab['node2'].fabric_ip} >/dev/null 2>&1; true")
    make_model(lab, "node1", model_path, shards="shards", sizes_mb=[4])
    cfg = config_for(lab, model_path)
    t0 = time.monotonic()
    r = cli(cfg, "sync", "model", "--wait", "--json", timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    [out] = json.loads(r.stdout)
    assert not out["ok"] and "node1 cannot log in to node2" in out["message"]
    assert "sparktui setup trust" in out["message"]
    assert time.monotonic() - t0 < 60  # an error, not a wait
    refused = cli(cfg, "setup", "trust")  # no terminal to confirm on: nothing is done
    assert refused.returncode == 1
    fixed = cli(cfg, "setup", "trust", "--yes", "--json", "--from", "node1")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    steps = json.loads(fixed.stdout)
    assert any("recorded host key of node2" in s["what"] for s in steps)
    r2 = cli(cfg, "sync", "model", "--wait", "--json", timeout=120)
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert sums(lab, "node1", model_path) == sums(lab, "node2", model_path)


async def test_unplugged_fabric_is_named_not_waited_on(lab, model_path):
    lab.trust("node1", "node2")
    make_model(lab, "node1", model_path, shards="shards", sizes_mb=[1])
    cfg = load_config(config_for(lab, model_path))
    lab.link_down("node2")
    try:
        t0 = time.monotonic()
        async with Cluster(cfg) as c:
            with pytest.raises(TransferError, match=r"the fabric \S+ is down: node2: \S+ on \S+ is down"):
                await asyncio.wait_for(sync_model(c, cfg), 60)
        assert time.monotonic() - t0 < 30
    finally:
        lab.link_up("node2")
