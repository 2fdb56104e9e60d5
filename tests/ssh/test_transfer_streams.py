"""Parallel rsync streams of one model copy, end to end on the simulated nodes of
test_transfers_local (in-process SSH servers, real rsync, a stand-in node-to-node ssh)."""

from __future__ import annotations

import asyncio
import subprocess

from sparktui.core.state.events import TransferProgress
from sparktui.core.remote.ssh import Cluster
from sparktui.core.transfers import cancel_transfer, list_transfers, sync_model
from sparktui.core.transfers.model_sync import inventory

from .test_transfers_local import MB, MODEL, client_key, make_env, same_tree, until, write_model  # noqa: F401


def _streams(env, k: int) -> None:
    env.opts.rsync_streams = k
    env.opts.stream_file_bytes = MB


async def test_three_streams_copy_the_tree_and_report_each_stream(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [4 * MB, 3 * MB, 3 * MB, 2 * MB, 100])
    _streams(env, 3)
    env.opts.bwlimit = "9m"  # ~1.3 s: progress is read while the streams run
    events: list[TransferProgress] = []
    async with Cluster(env.config) as c:
        [out] = await asyncio.wait_for(
            sync_model(c, env.config, emit=events.append, opts=env.opts, addrs=env.addrs), 60
        )
        [rec] = await list_transfers(c)
    assert out.ok, out.message
    assert rec.meta.streams == 3
    assert same_tree(env.model_dir("n1"), env.model_dir("n2"))
    rows = [e.streams for e in events if e.state == "running" and e.streams]
    assert rows and {r["n"] for r in rows[-1]} == {0, 1, 2}
    # the bar is the sum of the streams and never runs backwards
    running = [e.bytes for e in events if e.state == "running" and e.bytes]
    assert running == sorted(running) and max(running) == sum(r["bytes"] for r in rows[-1])
    assert events[-1].state == "done"
    assert rec.progress().streams and len(rec.progress().streams) == 3  # the listing sees them too


async def test_a_stream_that_falls_short_is_named_and_the_copy_stays_incomplete(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [4 * MB, 2 * MB, 2 * MB])
    # the destination has a non-empty directory where the largest shard (stream 1's) must go
    blocker = env.model_dir("n2") / "sub" / "part-0.safetensors"
    blocker.mkdir(parents=True)
    (blocker / "x").write_text("in the way")
    _streams(env, 2)
    async with Cluster(env.config) as c:
        [out] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 60)
        left = await inventory(c["n2"], MODEL)
    assert not out.ok
    assert "stream 1" in out.message and "sub/part-0.safetensors" in out.message
    assert left["incomplete"] is not None  # never taken for the model
    assert (env.model_dir("n2") / "part-1.safetensors").stat().st_size == 2 * MB  # stream 0 did its part


async def test_cancel_stops_every_stream_and_the_next_sync_resumes(make_env):
    env = await make_env(2)
    write_model(env.model_dir("n1"), [6 * MB, 6 * MB, 6 * MB])
    _streams(env, 3)
    env.opts.bwlimit = "3m"
    events: list[TransferProgress] = []
    async with Cluster(env.config) as c:
        task = asyncio.ensure_future(sync_model(c, env.config, emit=events.append, opts=env.opts, addrs=env.addrs))
        await until(
            lambda: any(e.state == "running" and e.streams and all(r["bytes"] for r in e.streams) for e in events),
            30,
            "every stream sending",
        )
        tid = next(e.id for e in events if e.state == "running")
        said = await cancel_transfer(c, tid)
        [out] = await asyncio.wait_for(task, 30)
        [rec] = await list_transfers(c)
        cut = await inventory(c["n2"], MODEL)
        env.opts.bwlimit = None
        [again] = await asyncio.wait_for(sync_model(c, env.config, opts=env.opts, addrs=env.addrs), 60)
        whole = await inventory(c["n2"], MODEL)
    state = env.homes["n1"] / ".local/state/sparktui/transfers" / tid
    pgid = (state / "pid").read_text().strip()
    left = subprocess.run(
        ["sh", "-c", f"ps -eo pgid=,stat= | awk '$1 == {pgid} && $2 !~ /^Z/'"], capture_output=True, text=True
    ).stdout
    assert "stopped" in said and rec.state == "cancelled" and not out.ok
    assert left == "", f"processes of the copy still running: {left}"
    assert cut["incomplete"] is not None and 0 < cut["bytes"] < 18 * MB  # partial files kept, marked
    assert again.ok and whole["incomplete"] is None
    assert same_tree(env.model_dir("n1"), env.model_dir("n2"))
