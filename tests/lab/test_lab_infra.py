"""The lab itself: real sshd with verified host keys, the subnets, dockerd with the product's flags,
the GPU tool shims, isolation between nodes, and a teardown that leaves nothing behind."""

from __future__ import annotations

import errno
import ipaddress
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import asyncssh
import pytest

from .labtools import wait_for
from .netlab import Lab, reap_stale

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]


def ssh(lab: Lab, node: str, cmd: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(lab.ssh_argv(node, cmd, **kw), capture_output=True, text=True, timeout=30)


# -- SSH ---------------------------------------------------------------------------------------
def test_openssh_reaches_each_node_with_the_lab_key(lab):
    for n in lab.nodes:
        r = ssh(lab, n.name, "hostname; echo $PATH; id -u")
        assert r.returncode == 0, r.stderr
        host, path, uid = r.stdout.split()
        assert (host, uid) == (n.name, "0")
        assert path.split(":")[0] == "/usr/local/sbin"  # the shims and the matching docker client


def test_a_wrong_host_key_is_refused(lab, tmp_path):
    n1, n2 = lab.nodes[:2]
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{n1.mgmt_ip} {n2.host_key}\n")  # node2's key under node1's address
    argv = lab.ssh_argv(n1.name, "true")
    argv[argv.index(f"UserKnownHostsFile={lab.known_hosts}")] = f"UserKnownHostsFile={wrong}"
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert r.returncode == 255
    assert "host key" in r.stderr.lower()


async def test_asyncssh_verifies_the_host_keys_of_the_known_hosts_file(lab):
    for n in lab.nodes:
        async with asyncssh.connect(
            n.mgmt_ip,
            username="root",
            client_keys=[str(lab.identity)],
            known_hosts=str(lab.known_hosts),
            config=[],
            connect_timeout=5,
        ) as conn:
            assert conn.get_server_host_key().get_fingerprint("sha256") == lab.host_key_fingerprint(n)
            r = await conn.run("hostname", check=True, timeout=10)
            assert r.stdout.strip() == n.name


def test_sshd_listens_on_every_address_of_the_node(lab):
    n1, n2 = lab.nodes[:2]
    probe = "exec 3<>/dev/tcp/{}/22 && head -c 8 <&3"
    for ip in (n2.mgmt_ip, n2.fabric_ip, "127.0.0.1"):
        r = lab.sh(n1 if ip != "127.0.0.1" else n2, ["timeout", "5", "bash", "-c", probe.format(ip)], check=False)
        assert r.stdout == "SSH-2.0-", (ip, r.stderr)


def test_stop_and_start_sshd(lab):
    n2 = lab.nodes[1]
    lab.stop_sshd(n2.name)
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((n2.mgmt_ip, 22), timeout=5).close()
    finally:
        lab.start_sshd(n2.name)
    assert ssh(lab, n2.name, "hostname").stdout.strip() == n2.name


# -- subnets -------------------------------------------------------------------------------------
def test_nodes_reach_each_other_over_the_fabric_and_ssh_after_trust(lab):
    n1, n2 = lab.nodes[:2]
    cmd = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", f"root@{n2.fabric_ip}", "hostname"]
    lab.untrust(n1.name, n2.name)  # whatever an earlier test of this shared lab set up
    assert lab.sh(n1.name, cmd, check=False).returncode == 255  # not trusted yet
    lab.trust(n1.name, n2.name)
    try:
        r = lab.sh(n1.name, cmd, check=False)
        assert (r.returncode, r.stdout.strip()) == (0, n2.name), r.stderr
    finally:
        lab.untrust(n1.name, n2.name)


def test_the_root_namespace_cannot_reach_the_fabric_or_wlan(lab):
    n = lab.nodes[1]
    for ip in (n.fabric_ip, n.wlan_ip):
        t0 = time.monotonic()
        with pytest.raises(OSError) as e:
            socket.create_connection((ip, 22), timeout=10).close()
        assert e.value.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH), e.value
        assert time.monotonic() - t0 < 1.0  # refused locally, nothing waited on a wire
        route = subprocess.run(["ip", "route", "get", ip], capture_output=True, text=True)
        assert route.returncode != 0 or route.stdout.startswith("unreachable")


def test_nodes_have_no_default_route(lab):
    for name, r in lab.on_each("ip route show default").items():
        assert r.stdout.strip() == "", name
    r = lab.sh(lab.nodes[0].name, "ip route get 192.0.2.1", check=False)  # a lookup only, sends nothing
    assert r.returncode != 0 and "unreachable" in r.stderr.lower()


def test_lab_subnets_are_disjoint_from_the_machine_routes(lab):
    block = ipaddress.ip_network(f"{lab.block}.0.0/16")
    subnets = [ipaddress.ip_network(s) for s in (lab.mgmt_subnet, lab.fabric_subnet, lab.wlan_subnet)]
    assert all(s.subnet_of(block) for s in subnets)
    routes = json.loads(
        subprocess.run(
            ["ip", "-4", "-j", "route", "show", "table", "main"], capture_output=True, text=True, check=True
        ).stdout
    )
    for r in routes:
        if r["dst"] == "default":
            continue
        net = ipaddress.ip_network(r["dst"], strict=False)
        if net.overlaps(block):  # only the lab's own routes fall inside its block
            assert net in subnets + [block], r
            assert r.get("type") == "unreachable" or net == subnets[0], r


def test_a_peers_wlan_address_swallows_packets(lab):
    """The extra network looks fine locally but nothing comes back: a connect just hangs."""
    n1, n2 = lab.nodes[:2]
    assert n2.wlan_ip in lab.sh(n2.name, "ip -4 -o addr show wlan0").stdout
    r = lab.sh(n1.name, ["timeout", "2", "bash", "-c", f"exec 3<>/dev/tcp/{n2.wlan_ip}/22"], check=False)
    assert r.returncode == 124  # still waiting when the timeout hit: no refusal, no unreachable


# -- docker ---------------------------------------------------------------------------------------
def test_docker_run_with_the_product_flags(lab):
    tag = lab.tiny_image()
    flags = [
        "--network",
        "host",
        "--ipc",
        "host",
        "--gpus",
        "all",
        "--ulimit",
        "memlock=-1",
        "--ulimit",
        "stack=67108864",
        "--cap-add",
        "IPC_LOCK",
    ]
    for n in lab.nodes:
        r = lab.sh(
            n.name,
            ["docker", "run", "--rm", *flags, tag, "sh", "-c", "ip -o -4 addr; ulimit -s"],
            check=False,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert f"{n.fabric_iface}" in r.stdout and n.fabric_ip in r.stdout  # the node's own network
        assert r.stdout.split()[-1] == str(67108864 // 1024)


def test_node_docker_client_matches_its_daemon(lab):
    r = lab.sh(lab.nodes[0].name, "docker version --format '{{.Client.Version}} {{.Server.Version}}'")
    client, server = r.stdout.split()
    assert client == server


def test_each_node_has_its_own_docker(lab):
    n1, n2 = lab.nodes[:2]
    tag = lab.tiny_image()
    name = f"only-on-{n1.name}"
    lab.sh(n1.name, ["docker", "run", "-d", "--name", name, "--network", "host", tag, "sleep", "60"], timeout=120)
    try:
        assert name in lab.sh(n1.name, "docker ps --format '{{.Names}}'").stdout
        assert name not in lab.sh(n2.name, "docker ps -a --format '{{.Names}}'").stdout
    finally:
        lab.sh(n1.name, ["docker", "rm", "-f", name], check=False)


# -- GPU tool shims ---------------------------------------------------------------------------
def test_nvidia_smi_reads_like_a_gb10(lab):
    n = lab.nodes[0].name
    r = lab.sh(
        n,
        "nvidia-smi --query-gpu=name,memory.total,memory.used,utilization.gpu,temperature.gpu "
        "--format=csv,noheader,nounits",
    )
    name, total, used, util, temp = [x.strip() for x in r.stdout.strip().split(",")]
    assert name == "NVIDIA GB10"
    assert total == used == "[N/A]"
    assert util.isdigit() and temp.isdigit()
    header = lab.sh(n, "nvidia-smi --query-gpu=name,memory.total --format=csv").stdout.splitlines()[0]
    assert header == "name, memory.total [MiB]"
    assert "Not Supported" in lab.sh(n, "nvidia-smi").stdout
    bad = lab.sh(n, "nvidia-smi --query-gpu=name,no.such.field --format=csv", check=False)
    assert bad.returncode == 2 and "no.such.field" in bad.stdout


def test_nvidia_smi_lists_processes_that_hold_gpu_memory(lab):
    n = lab.nodes[1].name
    query = "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits"
    assert lab.sh(n, query).stdout.strip() == ""
    pid = lab.sh(n, "SIM_GPU_MIB=4321 setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!").stdout.strip()
    try:
        rows = [[x.strip() for x in line.split(",")] for line in lab.sh(n, query).stdout.splitlines()]
        assert rows == [[pid, "4321"]]
        util = lab.sh(n, "nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits").stdout
        assert int(util) > 0
    finally:
        lab.sh(n, ["kill", pid], check=False)


def test_nvidia_smi_field_override(lab):
    n = lab.nodes[0].name
    lab.set_gpu(n, "temperature.gpu", "[Not Supported]")
    try:
        out = lab.sh(n, "nvidia-smi --query-gpu=temperature.gpu --format=csv,noheader").stdout.strip()
        assert out == "[Not Supported]"
    finally:
        lab.set_gpu(n, "temperature.gpu", None)
    assert lab.sh(n, "nvidia-smi --query-gpu=temperature.gpu --format=csv,noheader").stdout.strip().isdigit()


def test_ibdev2netdev_follows_the_fabric_link(lab):
    for n in lab.nodes:  # both halves of the port, the twin down as on a fresh Spark
        assert lab.sh(n.name, "ibdev2netdev").stdout.splitlines() == [
            f"{n.rdma} port 1 ==> {n.fabric_iface} (Up)",
            f"{n.twin_rdma} port 1 ==> {n.twin_iface} (Down)",
        ]
    n = lab.nodes[1]
    lab.link_down(n.name)
    try:
        wait_for(lambda: "(Down)" in lab.sh(n.name, "ibdev2netdev").stdout, 5, "the port to read Down")
        r = lab.sh(lab.nodes[0].name, ["timeout", "2", "bash", "-c", f"exec 3<>/dev/tcp/{n.fabric_ip}/22"], check=False)
        assert r.returncode != 0
    finally:
        lab.link_up(n.name)
    wait_for(lambda: "(Up)" in lab.sh(n.name, "ibdev2netdev").stdout, 5, "the port to read Up")


def test_fabric_interface_names_differ_between_nodes(lab):
    names = [n.fabric_iface for n in lab.nodes]
    assert len(set(names)) == len(names)
    for n in lab.nodes:
        r = json.loads(lab.sh(n.name, "ip -j -4 addr").stdout)
        found = {a["ifname"]: [i["local"] for i in a["addr_info"]] for a in r}
        assert found[n.fabric_iface] == [n.fabric_ip]
        assert found[n.mgmt_iface] == [n.mgmt_ip]
        assert found[n.wlan_iface] == [n.wlan_ip]


# -- isolation and mounts ---------------------------------------------------------------------------
def test_nodes_have_their_own_files_and_processes(lab):
    n1, n2 = lab.nodes[:2]
    lab.sh(n1.name, "mkdir -p /models/only-here && echo one > /models/only-here/f && echo x > /tmp/only-here")
    try:
        assert lab.sh(n2.name, "ls /models/only-here /tmp/only-here", check=False).returncode != 0
        assert not Path("/models/only-here").exists()
        pids1 = lab.sh(n1.name, "cat /run/lab/sshd.pid").stdout.strip()
        ps2 = lab.sh(n2.name, "ps -eo pid,args").stdout
        assert "sshd" in ps2 and f"node_init.sh {n1.dir}" not in ps2
        assert lab.sh(n1.name, "cat /proc/1/cmdline | tr '\\0' ' '").stdout.find(n1.dir) > 0
        assert pids1.isdigit()
    finally:
        lab.sh(n1.name, "rm -rf /models/only-here /tmp/only-here")


def test_mount_tmpfs_gives_a_small_disk(lab):
    n = lab.nodes[1].name
    lab.mount_tmpfs(n, "/models/small", "1m")
    try:
        r = lab.sh(n, "head -c 2000000 /dev/zero > /models/small/big", check=False)
        assert r.returncode != 0 and "No space left" in r.stderr
    finally:
        lab.umount(n, "/models/small")
    assert lab.sh(n, "findmnt /models/small", check=False).returncode != 0


# -- teardown ------------------------------------------------------------------------------------
def _node_pids(init_pid: int) -> set[int]:
    """Host pids of init_pid and all its descendants (the node's daemons and containers)."""
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(p.name))
    out, todo = set(), [init_pid]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo += children.get(pid, [])
    return out


def _leftovers(state: dict, pids: set[int]) -> list[str]:
    left = [
        f"pid {p}"
        for p in pids
        if Path(f"/proc/{p}").exists() and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    ]
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left += [f"netns {ns}" for ns in state["netns"] if ns in names]
    left += [f"link {ln}" for ln in state["links"] if Path(f"/sys/class/net/{ln}").exists()]
    routes = subprocess.run(["ip", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    left += [f"route {state['block']}" for line in routes.splitlines() if f"{state['block']}." in line]
    left += [
        f"cgroup {n['cgroup']}"
        for n in state["nodes"]
        for h in Path("/sys/fs/cgroup").iterdir()
        if (h / n["cgroup"]).exists()
    ]
    mounts = Path("/proc/self/mountinfo").read_text()
    left += ["mount" for line in mounts.splitlines() if state["dir"] in line]
    if Path(state["dir"]).exists():
        left.append(f"dir {state['dir']}")
    return left


def test_destroy_leaves_nothing_behind(make_lab):
    lab = make_lab(nodes=1)
    n = lab.nodes[0]
    tag = lab.tiny_image()
    lab.sh(n.name, ["docker", "run", "-d", "--network", "host", tag, "sleep", "300"], timeout=120)
    pids = _node_pids(n.pid)
    assert len(pids) >= 5  # init, sleep, sshd, dockerd, containerd, shim, the container
    state = json.loads(json.dumps(lab.state))
    lab.destroy()
    assert _leftovers(state, pids) == []


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_an_interrupted_owner_leaves_nothing_behind(how):
    """SIGTERM: the owner's atexit tears down. SIGKILL: the nodes die with their parent (pdeathsig),
    and the next lab (here reap_stale) removes the namespaces and routes."""
    code = (
        "import json, sys, time; from tests.lab.netlab import Lab; lab = Lab(nodes=1, docker=False).up(); "
        "print(json.dumps(lab.state), flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line:
            pytest.fail("the lab in the child process did not come up")
        state = json.loads(line)
        pids = _node_pids(state["nodes"][0]["pid"])
        assert pids
        proc.send_signal(getattr(signal, how))
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    wait_for(lambda: not any(Path(f"/proc/{p}").exists() for p in pids), 10, "the node's processes to die")
    if how == "SIGKILL":
        reap_stale()
    assert _leftovers(state, pids) == []


def test_mgmt_link_down_cuts_ssh_until_it_is_back(lab):
    n = lab.nodes[1]
    lab.mgmt_link_down(n.name)
    try:
        with pytest.raises(OSError):
            socket.create_connection((n.mgmt_ip, 22), timeout=2).close()
    finally:
        lab.mgmt_link_up(n.name)
    wait_for(lambda: ssh(lab, n.name, "hostname").stdout.strip() == n.name, 15, "ssh over the restored link")
