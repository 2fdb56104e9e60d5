"""The docker stand-in on a demo node runs the engine simulator as containers: logs, ps, exec, stop, rm."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request

from sparktui.core.config.config import load_config
from sparktui.core.nodes.probes import parse_docker_ps
from sparktui.core.remote.ssh import Cluster, sh

from .conftest import until

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ")
READY = "The server is fired up and ready to roll!"


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:  # a local SSH forward: 127.0.0.1 only
        return json.loads(r.read())


async def test_an_engine_container_runs_serves_and_stops(demo):
    config = load_config(demo.config_path)
    port = demo.ports["sglang"]
    m = demo.model_path
    async with Cluster(config) as cluster:
        node = cluster["spark1"]
        run = await node.run(
            sh(
                "docker",
                "run",
                "-d",
                "--name",
                "eng",
                "--label",
                "sparktui.deployment=t",
                "--network",
                "host",
                "--ipc",
                "host",
                "--gpus",
                "all",
                "--ulimit",
                "memlock=-1",
                "-v",
                f"{m}:{m}:ro",
                "-e",
                "SPARKTUI_SIM_SPEED=80",
                "lmsysorg/sglang:spark",
                "python3",
                "-m",
                "sglang.launch_server",
                "--model-path",
                m,
                "--tp",
                "1",
                "--host",
                "0.0.0.0",
                "--port",
                str(port),
            ),
            timeout=60,
        )
        assert run.ok, run.stderr
        cid = run.stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{64}", cid)

        async def ready() -> bool:
            r = await node.run(["docker", "logs", "eng"], timeout=30)
            return READY in r.stdout + r.stderr

        await until(ready, 90, "the simulated SGLang to be ready")
        ps = await node.run(
            ["docker", "ps", "-a", "--no-trunc", "--filter", "label=sparktui.deployment=t", "--format", "{{json .}}"]
        )
        (c,) = parse_docker_ps(ps.stdout)
        assert c.id == cid and c.name == "eng" and c.state == "running" and c.labels["sparktui.deployment"] == "t"

        # the engine's HTTP API, through sparktui's own SSH forward to the node
        local = await node.forward(port)
        models = await asyncio.to_thread(_get, f"http://127.0.0.1:{local}/v1/models")
        assert models["data"][0]["id"] == m

        # docker logs -t: RFC3339Nano stamps, and --since resumes at a line
        logs = await node.run("docker logs -t eng 2>&1")
        lines = logs.stdout.splitlines()
        assert lines and all(STAMP.match(x) for x in lines)
        stamps = [x.split(" ", 1)[0] for x in lines]
        assert stamps == sorted(set(stamps))  # one time per line, increasing: --since can resume exactly
        later = [x for x in lines if x.split(" ", 1)[0] > lines[0].split(" ", 1)[0]]
        since = await node.run(f"docker logs -t --since {later[0].split(' ', 1)[0]} eng 2>&1")
        start = lines.index(later[0])
        assert since.stdout.splitlines()[: len(lines) - start] == lines[start:]  # from that line on, nothing before

        # exec runs inside the container: its PID 1 is the engine, whose stdout is the log
        ex = await node.run(["docker", "exec", "eng", "sh", "-c", "echo exec-marker >/proc/1/fd/1; echo $$"])
        assert ex.ok, ex.stderr
        assert "exec-marker" in (await node.run(["docker", "logs", "--tail", "5", "eng"])).stdout
        top = await node.run(["docker", "top", "eng", "-o", "pid,args"])
        assert "sglang.launch_server" in top.stdout

        stop = await node.run(["docker", "stop", "-t", "10", "eng"], timeout=60)
        assert stop.ok and stop.stdout.strip() == "eng"
        state = await node.run(["docker", "inspect", "--format", "{{.State.Status}} {{.State.Running}}", "eng"])
        assert state.stdout.split() == ["exited", "false"]
        rm = await node.run(["docker", "rm", "-f", "eng"])
        assert rm.ok
        left = await node.run(["docker", "ps", "-aq", "--filter", "label=sparktui.deployment=t"])
        assert left.stdout.strip() == ""


async def test_attached_runs_pass_the_exit_code_and_rm_cleans_up(demo):
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        node = cluster["spark2"]
        r = await node.run(
            sh(
                "docker",
                "run",
                "--rm",
                "--name",
                "once",
                "nvcr.io/nvidia/vllm:25.11-py3",
                "python3",
                "-c",
                "import sys; print('hi from', __import__('socket').gethostname()); sys.exit(3)",
            ),
            timeout=60,
        )
        assert r.exit_status == 3 and r.stdout.strip() == "hi from spark2"
        gone = await node.run(["docker", "inspect", "once"])
        assert gone.exit_status == 1
        missing = await node.run(["docker", "run", "--rm", "nosuch/image:1", "true"], timeout=60)
        assert missing.exit_status == 125 and "pull access denied" in missing.stderr
        notfound = await node.run(["docker", "run", "--rm", "nvcr.io/nvidia/vllm:25.11-py3", "no-such-cmd"])
        assert notfound.exit_status == 127 and "executable file not found" in notfound.stderr


async def test_logs_of_both_streams_keep_the_order_they_were_written(demo):
    """docker logs writes stdout entries to stdout and stderr entries to stderr, each as it reads it: read
    through one pipe (2>&1, as sparktui's log stream reads them) the lines keep the log's order, which
    sparktui's resume by time (--since after the last stamp seen) depends on."""
    config = load_config(demo.config_path)
    lines = ["out 1", "err 2", "out 3", "err 4", "out 5"]
    script = "; ".join(f"echo '{x}'" + (" >&2" if x.startswith("err") else "") for x in lines)
    async with Cluster(config) as cluster:
        node = cluster["spark1"]
        run = await node.run(
            sh("docker", "run", "-d", "--name", "streams", "lmsysorg/sglang:spark", "sh", "-c", script), timeout=60
        )
        assert run.ok, run.stderr
        try:

            async def written() -> str:
                r = await node.run("docker logs -t streams 2>&1")
                return r.stdout if r.stdout.count("\n") >= len(lines) else ""

            got = [x.split(" ", 1) for x in (await until(written, 30, "the five lines")).splitlines()]
            assert sorted(text for _, text in got) == sorted(lines)
            stamps = [stamp for stamp, _ in got]
            assert stamps == sorted(stamps), got  # the log's order (each entry is stamped as it is written)
        finally:
            await node.run(["docker", "rm", "-f", "streams"])


async def test_a_name_is_taken_until_the_container_is_removed(demo):
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        node = cluster["spark1"]
        first = await node.run(sh("docker", "run", "-d", "--name", "dup", "lmsysorg/sglang:spark", "sleep", "60"))
        assert first.ok, first.stderr
        again = await node.run(sh("docker", "run", "-d", "--name", "dup", "lmsysorg/sglang:spark", "sleep", "60"))
        assert again.exit_status == 125 and "Conflict" in again.stderr
        busy = await node.run(["docker", "rm", "dup"])
        assert busy.exit_status == 1 and "running" in busy.stderr
        assert (await node.run(["docker", "rm", "-f", "dup"])).ok
        third = await node.run(sh("docker", "run", "-d", "--rm", "--name", "dup", "lmsysorg/sglang:spark", "true"))
        assert third.ok

        async def gone() -> bool:
            return (await node.run(["docker", "ps", "-aq", "--filter", "name=dup"])).stdout.strip() == ""

        await until(gone, 30, "the --rm container to go")


async def test_python_in_a_container_sees_its_node_network(demo):
    """The preflight check and the engines read the NICs from the kernel: in a demo container that is
    the node's view, and an address of another node cannot be bound."""
    config = load_config(demo.config_path)
    own, other = demo.node("spark2").addresses["fabric"], demo.node("spark1").addresses["fabric"]
    program = (
        "import socket, errno\n"
        "print(','.join(n for _, n in socket.if_nameindex()))\n"
        "for ip in (%r, %r):\n"
        "    s = socket.socket()\n"
        "    try:\n"
        "        s.bind((ip, 0)); print(ip, 'ok')\n"
        "    except OSError as e:\n"
        "        print(ip, errno.errorcode[e.errno])\n" % (own, other)
    )
    async with Cluster(config) as cluster:
        r = await cluster["spark2"].run(
            sh("docker", "run", "--rm", "-i", "--network", "host", "lmsysorg/sglang:spark", "python3", "-"),
            input=program,
            timeout=60,
        )
    assert r.ok, r.stderr
    names, mine, theirs = r.stdout.splitlines()
    assert "enp1s0f1np1" in names.split(",") and "wlan0" in names.split(",")
    assert mine == f"{own} ok" and theirs == f"{other} EADDRNOTAVAIL"


async def test_pause_freezes_a_container_and_unpause_thaws_it(demo):
    config = load_config(demo.config_path)
    port = demo.ports["sglang"]
    m = demo.model_path
    async with Cluster(config) as cluster:
        node = cluster["spark1"]
        run = await node.run(
            sh(
                "docker",
                "run",
                "-d",
                "--name",
                "frozen",
                "--label",
                "sparktui.deployment=p",
                "--network",
                "host",
                "-v",
                f"{m}:{m}:ro",
                "-e",
                "SPARKTUI_SIM_SPEED=80",
                "lmsysorg/sglang:spark",
                "python3",
                "-m",
                "sglang.launch_server",
                "--model-path",
                m,
                "--tp",
                "1",
                "--host",
                "0.0.0.0",
                "--port",
                str(port),
            ),
            timeout=60,
        )
        assert run.ok, run.stderr

        async def ready() -> bool:
            r = await node.run(["docker", "logs", "frozen"], timeout=30)
            return READY in r.stdout + r.stderr

        await until(ready, 90, "the simulated SGLang to be ready")
        local = await node.forward(port)
        try:
            assert (await node.run(["docker", "pause", "frozen"])).stdout.strip() == "frozen"
            ps = await node.run(["docker", "ps", "--filter", "name=frozen", "--format", "{{.Status}}"])
            assert ps.stdout.strip().endswith("(Paused)")
            again = await node.run(["docker", "pause", "frozen"])
            assert not again.ok and "already paused" in again.stderr
            # every process of it is stopped: even its HTTP server answers nothing
            try:
                await asyncio.wait_for(asyncio.to_thread(_get, f"http://127.0.0.1:{local}/v1/models"), 2)
                answered = True
            except (asyncio.TimeoutError, OSError):
                answered = False
            assert not answered
            assert (await node.run(["docker", "unpause", "frozen"])).ok
            models = await asyncio.to_thread(_get, f"http://127.0.0.1:{local}/v1/models")
            assert models["data"][0]["id"] == m
            assert (await node.run(["docker", "pause", "frozen"])).ok
            stop = await node.run(["docker", "stop", "-t", "10", "frozen"], timeout=60)  # a paused one stops too
            assert stop.ok
            state = await node.run(["docker", "inspect", "--format", "{{.State.Status}}", "frozen"])
            assert state.stdout.strip() == "exited"
        finally:
            await node.run(["docker", "rm", "-f", "frozen"])


async def test_a_container_writes_its_own_etc_root_and_run_not_the_machines(demo, tmp_path):
    # TensorRT-LLM's entrypoint makes /root/.ssh and /run/sshd and its head gets /etc/openmpi-hostfile: as
    # root the demo wrote this machine's, as a user it failed at the first write and the rank never started
    config = load_config(demo.config_path)
    mark = f"sparktui-demo-test-{tmp_path.name}"
    async with Cluster(config) as cluster:
        node = cluster["spark2"]
        r = await node.run(
            sh(
                "docker",
                "run",
                "--rm",
                "lmsysorg/sglang:spark",
                "sh",
                "-c",
                f"mkdir -p /root/.ssh /run/sshd && touch /root/.ssh/{mark} /run/sshd/{mark} && "
                f"echo x > /etc/{mark} && ls /root/.ssh /run/sshd && test -s /etc/passwd",
            ),
            timeout=60,
        )
        assert r.ok, r.stderr
        assert r.stdout.split() == ["/root/.ssh:", mark, "/run/sshd:", mark]  # and the machine's /etc is read
        again = await node.run(
            sh(
                "docker",
                "run",
                "--rm",
                "lmsysorg/sglang:spark",
                "sh",
                "-c",
                f"ls /root/.ssh/{mark} /run/sshd/{mark} /etc/{mark} 2>&1 || echo absent",
            ),
            timeout=60,
        )
        # docker run -d returns with the container's directories in place: an exec right after writes its own
        race = await node.run(
            sh(
                "sh",
                "-c",
                f"docker run -d --rm --name {mark} lmsysorg/sglang:spark sleep 20 "
                f'>/dev/null && docker exec {mark} sh -c "echo x > /etc/{mark}" && '
                f"docker rm -f {mark}",
            ),
            timeout=60,
        )
        assert race.ok, race.stderr
    assert "absent" in again.stdout  # each container starts from its own directories
    import os

    assert not any(os.path.lexists(p) for p in (f"/root/.ssh/{mark}", f"/run/sshd/{mark}", f"/etc/{mark}"))


def test_an_unnamed_container_gets_a_name_no_container_holds():
    # two `docker run --rm` in a row, the first one's container not yet gone, drew the same name and the second
    # failed with docker's Conflict; dockerd draws again, then adds a digit
    from sparktui.demo.docker.store import _LEFT, _RIGHT, _random_name

    every = {f"{a}_{b}" for a in _LEFT for b in _RIGHT}
    assert all(_random_name(every) not in every for _ in range(20))
    one_free = sorted(every)[0]
    assert _random_name(every - {one_free}) not in every - {one_free}
