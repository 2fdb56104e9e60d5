"""Faults on real nodes, mid-operation: the destination's sshd killed, its disk filled and its
fabric unplugged during a model sync, a docker load cut off, a changed host key, a taken port,
MaxSessions 1. Each ends in a clear outcome within its bound, and a cut-off copy is never counted
as the model: `check` says incomplete, `plan` errs, `launch` refuses and starts nothing, the next
sync completes it.
"""

from __future__ import annotations

import asyncio
import json
import re
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
from sparktui.core.transfers import TransferOptions, sync_model
from sparktui.core.transfers.model_sync import inventory

from .labtools import MB, REPO, STATE, cli, cli_env, make_model, sums, wait_for
from .netlab import Lab

pytestmark = pytest.mark.lab


def same_image(lab: Lab) -> str:
    """The tiny image with one ID on every node (saved on node1, loaded on the others), so that the
    plan has nothing to say about the image."""
    tag = "sparktui/faults-tiny:latest"  # its own name: other tests import the tiny image per node
    tar = lab["node1"].path / "tmp" / "faults-tiny.tar"  # node1's /tmp
    if not tar.exists():
        lab.sh(
            "node1",
            f"docker tag {shlex.quote(lab.tiny_image(['node1']))} {tag} && docker save {tag} > /tmp/faults-tiny.tar",
            timeout=120,
        )
        lab.load_image(tar, [n.name for n in lab.nodes[1:]])
    return tag


def config_for(lab: Lab, model_path: str, image: str | None = None, **ssh) -> Path:
    data = lab.config_data()
    data["model"]["path"] = model_path
    tag = image or same_image(lab)
    data["images"] = {"sglang": tag, "vllm": tag}
    data["ssh"].update(ssh)
    return lab.write_config(data)


def rsync_moving(lab: Lab, path: str, updates: int = 2):
    """A predicate: rsync on node1 towards `path` has printed this many progress updates."""
    probe = (
        f'for l in {STATE}/*/log; do grep -qF {shlex.quote(json.dumps(path))} "${{l%/log}}/meta.json" '
        f"&& tr '\\r' '\\n' < \"$l\" | grep -c '%'; done"
    )

    def moving() -> bool:
        out = lab.sh("node1", probe, check=False).stdout.split()
        return bool(out) and out[-1].isdigit() and int(out[-1]) >= updates

    return moving


def kill_sshd(lab: Lab, node: str) -> None:
    """sshd dies with every session it serves (the listener and its per-connection children, by pid)."""
    lab.sh(node, 'p=$(cat /run/lab/sshd.pid); kill -KILL $(pgrep -P "$p") "$p"; rm -f /run/lab/sshd.pid')


def forget(lab: Lab, path: str) -> None:
    lab.on_each(
        f'for m in {STATE}/*/meta.json; do [ -f "$m" ] || continue; grep -qF {shlex.quote(json.dumps(path))} "$m" '
        f'|| continue; d=${{m%/meta.json}}; p=$(cat "$d/pid" 2>/dev/null); [ -z "$p" ] || kill -KILL -"$p" '
        f'2>/dev/null; rm -rf "$d"; done; rm -rf {shlex.quote(path)}',
        check=False,
    )


def engine_containers(lab: Lab, cfg: Path) -> list[str]:
    name = load_config(cfg).cluster
    out = lab.on_each(["docker", "ps", "-aq", "--filter", f"label=sparktui.deployment={name}"])
    return [c for r in out.values() for c in r.stdout.split()]


def assert_not_counted(lab: Lab, cfg: Path, path: str) -> None:
    """node2's cut-off copy is "incomplete" in check, a plan error, and launch refuses it."""
    rc, out = _json(cli(cfg, "check", "--json", timeout=120))
    model = {n["name"]: n["model"] for n in out["nodes"]}
    assert model["node1"]["state"] == "present"
    assert model["node2"]["state"] == "incomplete" and not model["node2"]["present"], model["node2"]
    assert "from node1" in model["node2"]["incomplete"]
    text = cli(cfg, "check", timeout=120).stdout
    assert "node2: model incomplete at " + path in text
    rc, plan = _json(cli(cfg, "plan", "--engine", "vllm", "--json", timeout=120))
    assert any("node2: model incomplete" in e for e in plan["errors"]), plan["errors"]
    r = cli(cfg, "launch", "--engine", "vllm", "--yes", "--no-preflight", "--wait", "--timeout", "60", timeout=120)
    assert r.returncode == 1 and "node2: model incomplete" in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert engine_containers(lab, cfg) == []


def _json(r: subprocess.CompletedProcess) -> tuple[int, dict]:
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError:
        pytest.fail(f"no JSON (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")


@pytest.fixture
def model_path(lab):
    path = f"/models/fault-{uuid.uuid4().hex[:8]}"
    lab.trust("node1", "node2")
    yield path
    forget(lab, path)
    lab.untrust("node1", "node2")  # the lab is shared by the whole session: leave it as found


def test_sshd_killed_mid_sync_leaves_no_model_and_the_next_sync_completes(lab, model_path):
    make_model(lab, "node1", model_path, [16, 16, 16])
    cfg = config_for(lab, model_path)
    sync = subprocess.Popen(
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
            "8m",
        ],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(rsync_moving(lab, model_path), 60, "rsync progress on node1")
        kill_sshd(lab, "node2")
        out, err = sync.communicate(timeout=120)
    finally:
        if sync.poll() is None:
            sync.send_signal(signal.SIGKILL)
            sync.communicate(timeout=30)
        lab.start_sshd("node2")
    assert sync.returncode == 1, out + err
    [o] = json.loads(out)
    assert not o["ok"] and "rsync exit" in o["message"], o
    assert_not_counted(lab, cfg, model_path)

    again = cli(cfg, "sync", "model", "--wait", "--json", timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "every size equal" in json.loads(again.stdout)[0]["message"]
    rc, doc = _json(cli(cfg, "check", "--json", timeout=120))
    assert {n["name"]: n["model"]["state"] for n in doc["nodes"]} == {"node1": "present", "node2": "present"}
    assert sums(lab, "node1", model_path) == sums(lab, "node2", model_path)


def test_disk_filled_mid_sync_leaves_no_model_and_the_next_sync_completes(lab, model_path):
    disk = model_path + "-disk"
    path = disk + "/m"
    make_model(lab, "node1", path, [12, 12, 12])
    lab.mount_tmpfs("node2", disk, "48m")  # room for the model when the copy starts
    cfg = config_for(lab, path)
    try:
        sync = subprocess.Popen(
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
                "6m",
            ],
            cwd=REPO,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(rsync_moving(lab, path), 60, "rsync progress on node1")
            # something else fills the disk meanwhile
            lab.sh("node2", f"dd if=/dev/zero of={shlex.quote(disk)}/filler bs=1M >/dev/null 2>&1; true")
            out, err = sync.communicate(timeout=120)
        finally:
            if sync.poll() is None:
                sync.send_signal(signal.SIGKILL)
                sync.communicate(timeout=30)
        assert sync.returncode == 1, out + err
        [o] = json.loads(out)
        assert not o["ok"] and "No space left on device" in o["message"], o
        assert_not_counted(lab, cfg, path)

        lab.sh("node2", f"rm -f {shlex.quote(disk)}/filler")
        again = cli(cfg, "sync", "model", "--wait", "--json", timeout=180)
        assert again.returncode == 0, again.stdout + again.stderr
        rc, doc = _json(cli(cfg, "check", "--json", timeout=120))
        assert {n["name"]: n["model"]["state"] for n in doc["nodes"]} == {"node1": "present", "node2": "present"}
        assert sums(lab, "node1", path) == sums(lab, "node2", path)
    finally:
        forget(lab, path)
        lab.sh("node2", f"umount {shlex.quote(disk)}; rmdir {shlex.quote(disk)}", check=False)
        lab.sh("node1", f"rm -rf {shlex.quote(disk)}", check=False)


async def test_fabric_unplugged_mid_sync_ends_at_rsyncs_timeout_and_is_not_counted(lab, model_path):
    make_model(lab, "node1", model_path, [16, 16, 16])
    cfg = load_config(config_for(lab, model_path))
    opts = TransferOptions(poll=0.3, bwlimit="8m", io_timeout=5)  # rsync --timeout=5: no data for 5 s ends it
    events: list[TransferProgress] = []
    async with Cluster(cfg) as c:
        task = asyncio.ensure_future(sync_model(c, cfg, emit=events.append, opts=opts))
        loop = asyncio.get_running_loop()
        end = loop.time() + 60
        while not any(e.state == "running" and (e.bytes or 0) > 4 * MB for e in events):
            assert loop.time() < end and not task.done(), "no progress"
            await asyncio.sleep(0.1)
        lab.link_down("node2")
        try:
            t0 = loop.time()
            [out] = await asyncio.wait_for(task, 60)
            took = loop.time() - t0
            cut = await inventory(c["node2"], model_path)  # over the management link, still up
        finally:
            lab.link_up("node2")
        assert not out.ok and "rsync exit 30" in out.message, out.message
        assert took < 30
        assert cut["incomplete"] and "from node1" in cut["incomplete"]
        [again] = await asyncio.wait_for(sync_model(c, cfg, opts=TransferOptions(poll=0.3)), 120)
        whole = await inventory(c["node2"], model_path)
    assert again.ok, again.message
    assert whole["incomplete"] is None
    assert sums(lab, "node1", model_path) == sums(lab, "node2", model_path)


def test_changed_host_key_is_refused_with_the_ssh_keygen_fix(lab, model_path):
    make_model(lab, "node1", model_path, [1])
    cfg = config_for(lab, model_path)
    key = lab["node2"].path / "lab" / "ssh_host_ed25519_key"
    saved = {p: p.read_bytes() for p in (key, key.with_suffix(".pub"))}
    key.unlink()
    key.with_suffix(".pub").unlink()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    lab.start_sshd("node2")  # node2 reinstalled, or someone in the middle
    try:
        t0 = time.monotonic()
        rc, out = _json(cli(cfg, "check", "--json", timeout=60))
        node2 = {n["name"]: n for n in out["nodes"]}["node2"]
        assert rc == 1 and node2["reachable"] is False
        assert "changed" in node2["error"].lower()
        assert f"ssh-keygen -R {lab['node2'].mgmt_ip}" in node2["error"]
        assert {n["name"]: n for n in out["nodes"]}["node1"]["reachable"] is True
        r = cli(cfg, "launch", "--engine", "vllm", "--yes", "--no-preflight", "--timeout", "30", timeout=60)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert engine_containers(lab, cfg) == []
        assert time.monotonic() - t0 < 60
    finally:
        for p, data in saved.items():
            p.write_bytes(data)
        key.chmod(0o600)
        lab.start_sshd("node2")


def test_taken_port_is_named_and_the_launch_refused_before_anything_starts(lab, model_path):
    image = lab.sim_image()
    for n in ("node1", "node2"):
        make_model(lab, n, model_path, [1])
    data = lab.config_data()
    data["model"]["path"] = model_path
    data["images"] = {"sglang": image, "vllm": image}
    cfg = lab.write_config(data)
    # something else already serves on the head's vLLM port
    pid = lab.sh(
        "node1", "setsid python3 -m http.server 8000 --bind 0.0.0.0 </dev/null >/dev/null 2>&1 & echo $!"
    ).stdout.strip()
    try:
        t0 = time.monotonic()
        r = cli(cfg, "launch", "--engine", "vllm", "--yes", "--no-preflight", "--wait", "--timeout", "60", timeout=150)
        took = time.monotonic() - t0
        assert r.returncode == 1, r.stdout + r.stderr
        assert re.search(r"node1: port 8000 \(HTTP port\) is taken by python3 \(pid \d+\)", r.stderr), r.stderr
        assert "Traceback" not in r.stderr, r.stderr
        assert engine_containers(lab, cfg) == []
        assert took < 60
    finally:
        lab.sh("node1", ["kill", pid], check=False)


CUT_LOAD = """#!/bin/sh
# the link dies part-way through an image: the real docker load gets a cut-off stream
if [ "$1" = load ]; then head -c 400000 | /usr/bin/docker load; exit $?; fi
exec /usr/bin/docker "$@"
"""


def test_cut_off_image_load_is_reported_and_never_counted(lab, model_path):
    for n in ("node1", "node2"):
        make_model(lab, n, model_path, [1])
    tag = f"sparktui/faults-cut-{uuid.uuid4().hex[:6]}:latest"
    lab.sh("node1", ["docker", "tag", lab.tiny_image(["node1"]), tag])
    cfg = config_for(lab, model_path, image=tag)
    shim = lab["node2"].path / "sbin" / "docker"
    shim.unlink()
    shim.write_text(CUT_LOAD)
    shim.chmod(0o755)
    try:
        r = cli(cfg, "sync", "image", "vllm", "--wait", "--json", timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr
        by = {o["dest"]: o for o in json.loads(r.stdout)}
        assert not by["node2"]["ok"] and "docker load failed" in by["node2"]["message"], by["node2"]
        assert lab.sh("node2", ["docker", "image", "inspect", tag], check=False).returncode != 0
        rc, plan = _json(cli(cfg, "plan", "--engine", "vllm", "--json", timeout=120))
        assert any(e.startswith(f"node2: image {tag} is not there") for e in plan["errors"]), plan["errors"]
    finally:
        shim.unlink()
        shim.symlink_to("/usr/bin/docker")
    again = cli(cfg, "sync", "image", "vllm", "--wait", "--json", timeout=120)
    try:
        assert again.returncode == 0, again.stdout + again.stderr
        ids = {
            n: lab.sh(n, ["docker", "image", "inspect", "--format", "{{.Id}}", tag]).stdout for n in ("node1", "node2")
        }
        assert ids["node1"] == ids["node2"]
    finally:
        lab.on_each(f"docker rmi -f {tag} >/dev/null 2>&1; true", check=False)


async def test_max_sessions_1_bounds_every_wait_and_launch_refuses_within_its_timeout(lab, model_path):
    for n in ("node1", "node2"):
        make_model(lab, n, model_path, [1])
    # an image that holds the engine: one without it is refused before the sessions are counted
    cfg = config_for(lab, model_path, image=lab.sim_image())
    for n in ("node1", "node2"):
        lab.start_sshd(n, max_sessions=1)
    try:
        async with Cluster(load_config(cfg)) as c:
            node = c["node1"]
            assert await node.sessions_available(2) == 1
            log = node.stream(["sh", "-c", "echo up; exec sleep 60"])
            assert await log.__anext__() == "up"  # the one session is taken
            t0 = time.monotonic()
            r = await node.run(["true"], timeout=2)
            waited = time.monotonic() - t0
            await log.aclose()
        assert r.exit_status == 124 and "MaxSessions" in r.stderr, r
        assert waited < 4

        rc, doc = _json(cli(cfg, "check", "--json", timeout=120))  # check says so before any launch
        for n in doc["nodes"]:
            assert any("MaxSessions 1" in note and "a launch cannot run here" in note for note in n["notes"]), n

        t0 = time.monotonic()
        r = cli(cfg, "launch", "--engine", "vllm", "--yes", "--no-preflight", "--wait", "--timeout", "60", timeout=120)
        took = time.monotonic() - t0
        assert r.returncode == 1, r.stdout + r.stderr
        assert "MaxSessions" in r.stderr and "nothing was started" in r.stderr, r.stderr
        assert took < 60
        assert engine_containers(lab, cfg) == []
    finally:
        for n in ("node1", "node2"):
            lab.start_sshd(n)
