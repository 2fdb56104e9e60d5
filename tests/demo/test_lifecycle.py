"""A demo's life: what it starts ends with it, `demo up` / `demo down`, trust set up by sparktui itself."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from sparktui.core.config.config import load_config
from sparktui.core.remote.ssh import Cluster, sh
from sparktui.demo import namespaces
from sparktui.demo.cluster import DemoCluster
from sparktui.demo.errors import DemoError

from .conftest import require_namespaces, small, sparktui, sparktui_argv, until


def host_pids_with(marker: str) -> list[int]:
    """Processes on this machine whose command line holds marker."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                continue
    return out


async def test_stopping_the_demo_ends_containers_and_detached_jobs(tmp_path):
    require_namespaces()
    demo = await DemoCluster(small(tmp_path)).start()
    root = demo.root
    try:
        config = load_config(demo.config_path)
        async with Cluster(config) as cluster:
            r = await cluster["spark1"].run(sh("docker", "run", "-d", "lmsysorg/sglang:spark", "sleep", "3001"))
            assert r.ok, r.stderr
            r = await cluster["spark2"].run("setsid nohup sleep 3002 </dev/null >/dev/null 2>&1 & echo started")
            assert r.ok

        async def both_running() -> bool:
            return bool(host_pids_with("sleep\x003001") and host_pids_with("sleep\x003002"))

        # both outlive the SSH sessions that started them, as on a real node
        await until(both_running, 15, "the container and the detached job")
    finally:
        await demo.stop()

    async def all_gone() -> bool:
        return not host_pids_with("sleep\x003001") and not host_pids_with("sleep\x003002")

    await until(all_gone, 15, "the node's processes to end")
    assert not root.exists()


async def test_keep_leaves_the_directory_for_a_look_afterwards(tmp_path):
    require_namespaces()
    demo = DemoCluster(small(tmp_path, keep=True, nodes=1))
    async with demo:
        root = demo.root
    assert (root / "sparktui.yaml").is_file() and (root / "nodes" / "spark1" / "node.json").is_file()


async def test_a_machine_without_user_namespaces_gets_a_plain_reason(tmp_path, monkeypatch):
    fake = ["sh", "-c", "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1", "unshare"]
    monkeypatch.setattr(namespaces, "UNSHARE", fake)
    with pytest.raises(DemoError) as e:
        await DemoCluster(small(tmp_path)).start()
    assert "Operation not permitted" in str(e.value) and "user namespaces" in str(e.value)
    assert not list(tmp_path.iterdir())  # nothing was left behind


async def test_demo_up_prints_the_config_and_demo_down_stops_it(tmp_path, cli_env):
    require_namespaces()
    env = dict(cli_env, TMPDIR=str(tmp_path))
    proc = await asyncio.create_subprocess_exec(
        *sparktui_argv(),
        "demo",
        "up",
        "--json",
        "--model-mb",
        "1",
        "--speed",
        "60",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        assert line, (await proc.stderr.read()).decode()
        up = json.loads(line)
        config = Path(up["config"])
        assert config.is_file() and config.parent.parent == tmp_path
        rc, out, err = await sparktui(env, "--config", str(config), "check", "--json")
        assert rc == 0 and len(json.loads(out)["nodes"]) == 2, err
        rc, out, err = await sparktui(env, "demo", "down", up["id"], "--json")
        assert rc == 0 and json.loads(out)["stopped"] == [up["id"]], err
        assert await asyncio.wait_for(proc.wait(), 60) == 0
        assert not config.parent.exists()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _killed_demo_up(env: dict[str, str]) -> dict:
    """A `demo up` that ran, then was killed with -9: what it printed."""
    proc = await asyncio.create_subprocess_exec(
        *sparktui_argv(),
        "demo",
        "up",
        "--json",
        "--model-mb",
        "1",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        assert line, (await proc.stderr.read()).decode()
        return json.loads(line)
    finally:
        proc.kill()
        await proc.wait()


async def test_a_demo_killed_with_9_is_swept_by_the_next_demo_up_or_down(tmp_path, cli_env):
    require_namespaces()
    env = dict(cli_env, TMPDIR=str(tmp_path))
    demos = Path(cli_env["XDG_STATE_HOME"]) / "sparktui/demos"
    first = await _killed_demo_up(env)
    root = Path(first["root"])
    # the directory holds the client's key: its user's alone; the registry is out of the shared temp dir
    assert stat.S_IMODE(root.stat().st_mode) == 0o700 and (root / "client/id_ed25519").is_file()
    entry = demos / f"{first['id']}.json"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE(demos.stat().st_mode) == 0o700
    second = await _killed_demo_up(env)  # nothing ran to remove the first: the next `demo up` does
    assert not root.exists() and not entry.exists() and Path(second["root"]).exists()
    rc, out, err = await sparktui(env, "demo", "down", "--json")
    assert rc == 1 and json.loads(out)["stopped"] == [], err  # nothing to stop, yet it cleans up
    assert not Path(second["root"]).exists() and not list(demos.iterdir())


async def test_setup_trust_then_sync_on_a_demo_without_trust(tmp_path, cli_env):
    require_namespaces()
    async with DemoCluster(small(tmp_path, trust=False)) as demo:
        conf = str(demo.config_path)
        rc, out, err = await sparktui(cli_env, "--config", conf, "sync", "model", "--wait", "--json")
        dst = demo.node_model_dir("spark2")
        assert rc != 0 and "setup trust" in out + err
        assert not (dst.exists() and any(dst.iterdir()))
        rc, out, err = await sparktui(cli_env, "--config", conf, "setup", "trust", "--yes", "--json")
        assert rc == 0, out + err
        rc, out, err = await sparktui(cli_env, "--config", conf, "sync", "model", "--wait", "--json")
        assert rc == 0, out + err
        src = demo.node_model_dir("spark1")
        assert sorted(p.name for p in dst.iterdir()) == sorted(p.name for p in src.iterdir())
        assert all((dst / p.name).read_bytes() == p.read_bytes() for p in src.iterdir())
