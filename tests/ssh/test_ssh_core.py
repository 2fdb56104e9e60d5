"""The SSH core against in-process servers: commands, quoting, streams, host keys, caps, reconnects."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess

import pytest

from sparktui.core.state.journal import Journal
from sparktui.core.remote.ssh import Cluster, HostKeyError, Node, NodeUnreachable, script, sh


async def test_run_returns_status_and_output(ssh_env):
    cfg, _ = await ssh_env(1)
    async with Cluster(cfg) as c:
        r = await c["n1"].run("echo out; echo err >&2; exit 3")
    assert (r.exit_status, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.ok


async def test_arguments_reach_the_node_as_data(ssh_env, tmp_path):
    cfg, _ = await ssh_env(1)
    canary = tmp_path / "canary"
    evil = f"x; touch {canary}; $(touch {canary}) `touch {canary}` | & > '\"\nnewline"
    async with Cluster(cfg) as c:
        r = await c["n1"].run(["printf", "%s", evil])
        r2 = await c["n1"].run(script("printf %s {v}", v=evil))
    assert r.stdout == evil and r2.stdout == evil
    assert not canary.exists()


async def test_stream_replaces_undecodable_bytes_and_keeps_going(ssh_env):
    cfg, _ = await ssh_env(1)
    async with Cluster(cfg) as c:
        lines = [ln async for ln in c["n1"].stream(r"printf 'a\377b\nsecond\nlast-no-newline'")]
        r = await c["n1"].run("echo still-connected")
    assert lines == ["a\ufffdb", "second", "last-no-newline"]
    assert r.stdout == "still-connected\n"


async def test_closing_a_stream_stops_the_remote_process(ssh_env, tmp_path):
    cfg, _ = await ssh_env(1)
    pidfile = tmp_path / "pid"
    async with Cluster(cfg) as c:
        agen = c["n1"].stream(script("sh -c 'echo $$ > {p}; exec sleep 300'", p=str(pidfile)) + " & wait; echo never")
        # the stream prints nothing until killed: start it, wait for the pid file, close it
        task = asyncio.ensure_future(agen.__anext__())
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            await asyncio.sleep(0.02)
        pid = int(pidfile.read_text())
        task.cancel()
        with pytest.raises((asyncio.CancelledError, StopAsyncIteration)):
            await task
        await agen.aclose()
        for _ in range(250):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.02)
        else:
            os.kill(pid, 9)
            pytest.fail("remote process survived the closed stream")


async def test_unknown_host_key_is_refused_with_fingerprint_and_fix(ssh_env):
    cfg, servers = await ssh_env(1, trust=False)
    node = Node(cfg.nodes[0], cfg.ssh)
    with pytest.raises(HostKeyError) as e:
        await node.connect()
    fp = servers[0].host_key.get_fingerprint("sha256")
    assert fp in str(e.value)
    assert "ssh-keyscan -p" in str(e.value) and "unknown" in str(e.value)


async def test_accept_new_records_the_key_then_refuses_a_changed_one(ssh_env):
    import asyncssh

    cfg, servers = await ssh_env(1, trust=False, host_key_policy="accept-new")
    node = Node(cfg.nodes[0], cfg.ssh)
    await node.connect()
    await node.close()
    assert servers[0].host_key.export_public_key("openssh").decode().split()[1] in open(cfg.ssh.known_hosts).read()
    # same port, new key: the node "was reinstalled" or someone is in the middle
    port = servers[0].port
    await servers[0].stop()
    from sparktui.demo.sshserver import LocalSshServer

    new = await LocalSshServer(asyncssh.generate_private_key("ssh-ed25519"), servers[0].authorized, port=port).start()
    try:
        with pytest.raises(HostKeyError) as e:
            await Node(cfg.nodes[0], cfg.ssh).connect()
        assert "CHANGED" in str(e.value) and "ssh-keygen -R" in str(e.value)
        # the fix, run as printed, removes the entry (a non-22 port is stored as [host]:port)
        fix = re.search(r"`(ssh-keygen -R [^`]+)`", str(e.value)).group(1)
        assert f"[127.0.0.1]:{port}" in fix
        if shutil.which("ssh-keygen"):
            subprocess.run(fix, shell=True, check=True, capture_output=True)
            assert str(port) not in open(cfg.ssh.known_hosts).read()
    finally:
        await new.stop()


async def test_unreachable_node_fails_fast_and_others_connect(ssh_env):
    cfg, servers = await ssh_env(2)
    await servers[1].stop()
    async with Cluster(cfg) as c:
        assert c["n1"].connected
        assert not c["n2"].connected and "refused" in (c["n2"].error or "").lower()
        r = await c["n2"].run("true")
    assert r.exit_status == 255


async def test_channels_per_node_are_capped(ssh_env):
    cfg, servers = await ssh_env(1, max_channels=3)
    async with Cluster(cfg) as c:
        results = await asyncio.gather(*(c["n1"].run("sleep 0.1; echo ok") for _ in range(20)))
    assert all(r.stdout == "ok\n" for r in results)
    assert servers[0].stats.peak_channels == 3


async def test_waiting_for_a_channel_counts_against_the_commands_timeout(ssh_env):
    cfg, _ = await ssh_env(1, max_channels=1)
    async with Cluster(cfg) as c:
        node = c["n1"]
        log = node.stream("echo up; exec sleep 30")
        assert await log.__anext__() == "up"  # the only channel is taken for as long as the stream lives
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r = await node.run("true", timeout=0.5)
        waited = loop.time() - t0
        await log.aclose()
        after = await node.run("echo free", timeout=5)
    assert r.exit_status == 124 and "no SSH channel free within 0.5 s" in r.stderr
    assert "all 1 channels (ssh.max_channels) to n1 are in use" in r.stderr
    assert waited < 2
    assert after.stdout == "free\n"


async def test_counting_sessions_holds_them_side_by_side_then_lets_them_go(ssh_env):
    cfg, servers = await ssh_env(1)
    async with Cluster(cfg) as c:
        node = c["n1"]
        assert await node.sessions_available(3) == 3
        assert servers[0].stats.peak_channels == 3
        assert node.channel_limit == cfg.ssh.max_channels  # nothing refused: the cap stays
        assert await node.sessions_short(2) is None
        assert node._slots.used == 0  # every counted channel was given back
        r = await node.run("echo after", timeout=5)
    assert r.stdout == "after\n"


async def test_reconnects_after_the_link_drops(ssh_env):
    cfg, servers = await ssh_env(1)
    changes = []
    async with Cluster(cfg, on_change=lambda n: changes.append(n.connected)) as c:
        servers[0].drop_connections()
        for _ in range(200):
            if not c["n1"].connected:
                break
            await asyncio.sleep(0.01)
        assert await c["n1"].wait_connected(timeout=10)
        r = await c["n1"].run("echo back")
    assert r.stdout == "back\n"
    assert False in changes and changes[-1] is False  # closed at the end


async def test_journal_records_every_command_with_secrets_masked(ssh_env):
    cfg, _ = await ssh_env(1)
    j = Journal()
    async with Cluster(cfg, journal=j) as c:
        await c["n1"].run(sh("env", "HF_TOKEN=hf_supersecret", "true"))
        await c["n1"].run("exit 4")
    cmds = [(e.node, e.command, e.exit_status) for e in j.entries]
    assert ("n1", "env HF_TOKEN=**** true", 0) in cmds
    assert ("n1", "exit 4", 4) in cmds
    assert all("supersecret" not in e.command for e in j.entries)


async def test_connect_timeout_is_honoured():
    # 127.0.0.1 port with a listener that never speaks SSH: the handshake times out
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    from sparktui.core.config.config import NodeConfig, SshConfig

    node = Node(NodeConfig(name="mute", host="127.0.0.1", port=port), SshConfig(connect_timeout=1, ssh_config=[]))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(NodeUnreachable):
        await node.connect()
    assert loop.time() - t0 < 4
    server.close()


async def test_ssh_config_alias_and_proxyjump_are_honoured(ssh_env, tmp_path):
    cfg, servers = await ssh_env(2)
    servers[0].forwarding = True  # the jump host lets us through to the second server
    key = cfg.nodes[0].identity_file
    conf = tmp_path / "ssh_config"
    conf.write_text(
        # the jump connection is asyncssh's own: it reads known hosts from the ssh config, as OpenSSH does
        f"Host jumpbox\n  HostName 127.0.0.1\n  Port {servers[0].port}\n  User root\n  IdentityFile {key}\n"
        f"  UserKnownHostsFile {cfg.ssh.known_hosts}\n"
        f"Host behind\n  HostName 127.0.0.1\n  Port {servers[1].port}\n  User root\n  IdentityFile {key}\n"
        f"  ProxyJump jumpbox\n"
    )
    from sparktui.core.config.config import NodeConfig, SshConfig

    ssh = SshConfig(known_hosts=cfg.ssh.known_hosts, connect_timeout=3, ssh_config=[str(conf)])
    node = Node(NodeConfig(name="behind", host="behind"), ssh)
    r = await node.run("echo through")
    await node.close()
    assert r.stdout == "through\n", r.stderr
    assert len(servers[0].stats.commands) == 0 and servers[1].stats.commands == ["echo through"]
