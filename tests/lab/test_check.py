"""Foundation checks against real nodes: `sparktui check` and the SSH layer (Cluster/Node)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sparktui.core.config.config import ConfigError, load_config
from sparktui.core.remote.ssh import Cluster, script, sh

from .labtools import REPO, wait_for

pytestmark = pytest.mark.lab


def check(config: Path, timeout: float = 60, *extra: str) -> tuple[int, dict, float, str]:
    """Run `sparktui check --config F --json [EXTRA...]`: (exit code, parsed output, seconds, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", "check", "--config", str(config), "--json", *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    elapsed = time.monotonic() - t0
    try:
        out = json.loads(r.stdout) if r.stdout.strip() else {}
    except ValueError:
        pytest.fail(
            f"check --json printed something that is not JSON (exit {r.returncode}):\n"
            f"{r.stdout[:2000]}\n{r.stderr[-2000:]}"
        )
    return r.returncode, out, elapsed, r.stderr


def by_name(out: dict) -> dict[str, dict]:
    return {n["name"]: n for n in out.get("nodes", [])}


# -- what check finds -----------------------------------------------------------------------------
def assert_fabric(lab, out: dict) -> None:
    fabric = {s["subnet"]: s for s in out.get("fabric", [])}
    assert lab.fabric_subnet in fabric, out.get("fabric")
    entry = fabric[lab.fabric_subnet]
    assert entry["rdma"] is True
    for n in lab.nodes:  # each node with its own interface name
        assert entry["nodes"][n.name] == {"iface": n.fabric_iface, "ip": n.fabric_ip, "rdma": n.rdma}
    # the best candidate comes first: RoCE on the fabric, not the management LAN or the wlan
    assert out["fabric"][0]["subnet"] == lab.fabric_subnet


def test_check_lists_the_nodes_and_the_fabric(lab):
    rc, out, _, err = check(lab.config_path)
    assert rc == 0, err
    nodes = by_name(out)
    assert set(nodes) == {n.name for n in lab.nodes}
    for n in lab.nodes:
        facts = nodes[n.name]
        assert facts["reachable"] is True and facts["error"] is None
        assert facts["host"] == n.mgmt_ip
        assert facts["gpu"]["name"] == "NVIDIA GB10"
        assert facts["gpu"]["memory_total_bytes"] is None  # GB10: unified memory, read from meminfo
        assert facts["memory"]["total_bytes"] > 0
        assert facts["docker"]["version"]
    assert_fabric(lab, out)


def test_check_on_three_nodes(lab3):
    rc, out, _, err = check(lab3.config_path)
    assert rc == 0, err
    assert [n["name"] for n in out["nodes"]] == [n.name for n in lab3.nodes]
    assert len({n.fabric_iface for n in lab3.nodes}) == 3
    assert_fabric(lab3, out)


# -- host keys ------------------------------------------------------------------------------------
def test_an_unknown_host_key_is_refused(lab):
    kh = Path(lab.dir) / f"known_hosts-empty-{uuid.uuid4().hex[:6]}"
    kh.write_text("")
    data = lab.config_data()
    data["ssh"]["known_hosts"] = str(kh)
    rc, out, _, err = check(lab.write_config(data))
    assert rc == 1, err
    for n in lab.nodes:
        facts = by_name(out)[n.name]
        assert facts["reachable"] is False
        assert lab.host_key_fingerprint(n) in facts["error"]  # the user can compare it
        assert "ssh-keyscan" in facts["error"] and n.mgmt_ip in facts["error"]  # and how to trust it
    assert kh.read_text() == ""  # strict: nothing was trusted behind the user's back


def test_a_changed_host_key_is_refused(lab):
    kh = Path(lab.dir) / f"known_hosts-swapped-{uuid.uuid4().hex[:6]}"
    n1, n2 = lab.nodes[:2]
    kh.write_text(f"{n1.mgmt_ip} {n2.host_key}\n{n2.mgmt_ip} {n1.host_key}\n")
    before = kh.read_text()
    data = lab.config_data()
    data["ssh"]["known_hosts"] = str(kh)
    rc, out, _, err = check(lab.write_config(data))
    assert rc == 1, err
    for n in (n1, n2):
        facts = by_name(out)[n.name]
        assert facts["reachable"] is False
        assert lab.host_key_fingerprint(n) in facts["error"]
    assert kh.read_text() == before


@pytest.mark.parametrize("start", ["missing", "empty"])
def test_accept_new_records_the_real_host_keys(lab, start):
    """accept-new on a first run: the known_hosts file may not even exist yet."""
    kh = Path(lab.dir) / f"known_hosts-new-{uuid.uuid4().hex[:6]}"
    if start == "empty":
        kh.write_text("")
    data = lab.config_data()
    data["ssh"].update(known_hosts=str(kh), host_key_policy="accept-new")
    rc, out, _, err = check(lab.write_config(data))
    assert rc == 0, [n["error"] for n in out.get("nodes", [])] or err
    recorded = {line.split()[0]: " ".join(line.split()[1:3]) for line in kh.read_text().splitlines()}
    assert recorded == {n.mgmt_ip: n.host_key for n in lab.nodes}


# -- a node that is down --------------------------------------------------------------------------
def test_a_stopped_sshd_is_reported_while_the_other_node_answers(lab):
    n1, n2 = lab.nodes[:2]
    lab.stop_sshd(n2.name)
    try:
        rc, out, elapsed, err = check(lab.config_path)
    finally:
        lab.start_sshd(n2.name)
    assert rc == 1, err
    nodes = by_name(out)
    assert nodes[n2.name]["reachable"] is False and nodes[n2.name]["error"]
    assert nodes[n1.name]["reachable"] is True
    assert nodes[n1.name]["gpu"]["name"] == "NVIDIA GB10"
    assert elapsed < lab.connect_timeout + 5  # process start-up included


SILENT_LISTENER = (
    "import socket, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', 22)); s.listen(64); print('listening', flush=True)\n"
    "time.sleep(60)\n"  # accepts connections (kernel backlog) and never says a word
)


def test_a_node_that_never_answers_is_given_up_after_the_connect_timeout(lab):
    n1, n2 = lab.nodes[:2]
    lab.stop_sshd(n2.name)
    pid = lab.sh(
        n2.name,
        ["sh", "-c", 'setsid python3 -c "$1" </dev/null >/tmp/silent.log 2>&1 & echo $!', "sh", SILENT_LISTENER],
    ).stdout.strip()
    try:
        wait_for(lambda: "listening" in lab.sh(n2.name, "cat /tmp/silent.log").stdout, 10, "the silent listener")
        rc, out, elapsed, err = check(lab.config_path)
    finally:
        lab.sh(n2.name, ["kill", pid], check=False)
        lab.start_sshd(n2.name)
    assert rc == 1, err
    nodes = by_name(out)
    assert nodes[n2.name]["reachable"] is False and nodes[n2.name]["error"]
    assert nodes[n1.name]["reachable"] is True and nodes[n1.name]["gpu"]["name"] == "NVIDIA GB10"
    assert elapsed < lab.connect_timeout + 5


# -- channels -------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_channels", [3, None], ids=["max_channels=3", "max_channels=default"])
async def test_twenty_concurrent_runs_against_max_sessions_3(make_lab, max_channels):
    lab = make_lab(nodes=1, max_sessions=3, docker=False)
    data = lab.config_data()
    if max_channels is not None:
        data["ssh"]["max_channels"] = max_channels
    config = load_config(lab.write_config(data))
    async with Cluster(config) as cluster:
        node = cluster["node1"]
        assert node.connected, node.error
        runs = [node.run(["sh", "-c", 'sleep 0.2; echo "$1"', "sh", str(i)], timeout=30) for i in range(20)]
        results = await asyncio.wait_for(asyncio.gather(*runs), timeout=90)
    failed = [(i, r.exit_status, r.stderr.strip()) for i, r in enumerate(results) if not r.ok]
    assert failed == []
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(20)]


# -- quoting --------------------------------------------------------------------------------------
def payload(token: str, field: str, newline: bool = True) -> str:
    """A string that creates a canary file if any shell ever runs it: every metacharacter and a newline."""
    c = f"/tmp/sparktui-canary-{token}-{field}"
    tail = f"\ntouch {c}\n" if newline else ""
    if field == "cluster":  # a name of at most 63 characters: command substitution and both quotes
        return f"$(touch {c[: -len(field)]}c)'\"{tail}"
    return f"x;touch {c};$(touch {c})`touch {c}`|touch {c}&touch {c}>{c}'\"{tail}"


def canaries(lab, token: str) -> dict[str, list[str]]:
    found = {
        name: r.stdout.split()
        for name, r in lab.on_each(f"ls /tmp /root /models | grep -F sparktui-canary-{token} || true").items()
    }
    found["this machine"] = [p.name for p in Path("/tmp").glob(f"sparktui-canary-{token}*")]
    return {k: v for k, v in found.items() if v}


FIELDS = {  # config fields whose strings may reach a remote command: (config dict, value, lab)
    "cluster": lambda d, v, lab: d.update(cluster=v),
    "model.name": lambda d, v, lab: d["model"].update(name=v),
    "model.path": lambda d, v, lab: d["model"].update(path="/models/" + v),
    "images.sglang": lambda d, v, lab: d["images"].update(sglang=v),
    "images.vllm": lambda d, v, lab: d["images"].update(vllm=v),
    "docker.env": lambda d, v, lab: d["docker"].update(env={"EVIL": v}),
    "docker.extra_args": lambda d, v, lab: d["docker"].update(extra_args=[v]),
    "docker.volumes": lambda d, v, lab: d["docker"].update(volumes=[v + ":/data"]),
    "docker.shm_size": lambda d, v, lab: d["docker"].update(shm_size=v),
    "nodes.interfaces": lambda d, v, lab: d["nodes"][0].update(interfaces={lab.fabric_subnet: v}),
}


def test_shell_metacharacters_in_the_config_stay_data(lab):
    """Each field is refused by the config loader (a ConfigError, not a crash) or reaches the nodes
    as data; `check` runs its probes with all the accepted ones and no canary ever appears. A loader
    may refuse control characters, so a refused field is tried again without the newline."""
    token = uuid.uuid4().hex[:8]
    accepted: dict[str, str] = {}
    for field, put in FIELDS.items():
        for newline in (True, False):
            value = payload(token, field, newline)
            data = lab.config_data()
            put(data, value, lab)
            try:
                load_config(lab.write_config(data))
            except ConfigError:
                continue
            accepted[field] = value
            break
    # `;` `$` quotes and the like are legal in a path and a name: these two must be accepted
    assert "model.path" in accepted and "cluster" in accepted, sorted(accepted)

    data = lab.config_data()
    for field, value in accepted.items():
        FIELDS[field](data, value, lab)
    model_path = data["model"]["path"]
    # The model directory exists on the head only, under its hostile name: check must find it.
    lab.sh(lab.head.name, ["sh", "-c", 'mkdir -p -- "$1" && echo weights > "$1/w.safetensors"', "sh", model_path])
    try:
        rc, out, _, err = check(lab.write_config(data))
        assert canaries(lab, token) == {}
        assert rc in (0, 1), err
        nodes = by_name(out)
        assert all(nodes[n.name]["reachable"] for n in lab.nodes), err
        head = nodes[lab.head.name]["model"]
        assert (head["path"], head["present"], head["files"]) == (model_path, True, 1)
        assert nodes[lab.nodes[1].name]["model"]["present"] is False
    finally:
        lab.sh(lab.head.name, "rm -rf /models/x*")


async def test_node_run_and_stream_carry_metacharacters_as_data(lab):
    token = uuid.uuid4().hex[:8]
    evil = payload(token, "ssh")
    config = load_config(lab.config_path)
    async with Cluster(config) as cluster:
        node = cluster[lab.head.name]
        argv = await node.run(["printf", "%s", evil], timeout=30)
        line = await node.run(sh("printf", "%s", evil), timeout=30)
        tmpl = await node.run(script("printf %s {v}", v=evil), timeout=30)
        streamed = [x async for x in node.stream(["printf", "%s", evil])]
    assert argv.stdout == line.stdout == tmpl.stdout == evil
    assert "\n".join(streamed) == evil.rstrip("\n")
    assert canaries(lab, token) == {}


# -- streams on a real sshd -----------------------------------------------------------------------
async def test_closing_a_stream_stops_the_remote_command(lab):
    """Without a PTY, OpenSSH leaves a command running when its channel closes: the layer must not."""
    marker = str(300 + uuid.uuid4().int % 600)  # a sleep length no other process on the node uses
    n = lab.head.name
    config = load_config(lab.config_path)
    async with Cluster(config) as cluster:
        stream = cluster[n].stream(["sh", "-c", f"echo started; exec sleep {marker}"])
        assert await asyncio.wait_for(stream.__anext__(), timeout=30) == "started"
        assert f"sleep {marker}" in lab.sh(n, "ps -eo args").stdout
        await stream.aclose()
        wait_for(lambda: f"sleep {marker}" not in lab.sh(n, "ps -eo args").stdout, 10, "the remote command to stop")


async def test_undecodable_output_does_not_break_the_connection(lab):
    config = load_config(lab.config_path)
    async with Cluster(config) as cluster:
        node = cluster[lab.head.name]
        r = await node.run(["printf", "a\\377\\376b\\n"], timeout=30)
        lines = [x async for x in node.stream(["printf", "c\\377d\\n"])]
        after = await node.run(["echo", "still here"], timeout=30)
    assert r.ok and r.stdout.startswith("a") and r.stdout.rstrip().endswith("b")
    assert len(lines) == 1 and lines[0][0] == "c" and lines[0][-1] == "d"
    assert after.stdout == "still here\n"
