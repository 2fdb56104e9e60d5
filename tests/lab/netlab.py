"""A cluster of lab nodes on this machine, built from Linux namespaces (needs root).

Each node is a network namespace plus its own mount, UTS and PID namespaces, with its own OpenSSH
sshd, its own dockerd, and its own /models, /root (so /root/.ssh), /tmp, /var/lib/docker and /run
(so its own docker socket). Only the GPU tools are simulated (tests/lab/shims). Three subnets:

- management: the nodes and this machine's root namespace on a bridge; sparktui dials these addresses;
- fabric: the nodes only, through a bridge inside a spare "switch" namespace, with Spark-like
  interface names that differ between nodes and a RoCE device per node (ibdev2netdev); as on a fresh
  Spark, each port shows two halves: the fabric interface (addressed, up, MTU 1500) and its twin
  (`enp1s0f1np1` / `enP2p1s0f1np1`, its own RDMA device, down and unaddressed) cabled to the same
  switch, whose ports take jumbo frames so a node's MTU is the node's own choice; with
  `layout="sync"` each twin is up on a subnet of its own from the start (the next /24), as NVIDIA Sync
  writes a port: two halves, two subnets, one interface per node on each;
- wlan: one `wlan0` per node, all on one subnet but each cabled to a spare "blackhole" namespace,
  with permanent neighbour entries, so a peer's wlan address looks reachable and silently drops
  every packet (what makes a rendezvous on the wrong network hang).

The root namespace gets an `unreachable` route for the whole lab block and for each subnet it is
not attached to, and the nodes get no default route: nothing a node or a test sends can leave the
machine. Subnets are 10.X.0.0/16 blocks that no route of this machine overlaps (checked under a lock).

Teardown kills each node's PID 1 (which takes every process of the node with it, containers
included), removes namespaces, links, routes and cgroups, and runs from atexit and SIGTERM too. If
the owning process is killed outright, its nodes die with it (parent-death signal) and the next lab
reaps what is left.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Sequence

import yaml

from . import tinyimage
from .plumbing import (
    BASE_DIR,
    LabError,
    add_line,
    alive,
    drop_line,
    fingerprint,
    free_block,
    ip_batch,
    keygen,
    machine_lock,
    rdma_name,
    readline_within,
    run,
    start_time,
    twin_name,
)
from .teardown import list_labs, reap_stale, teardown

# A DGX Spark's /proc/meminfo with its memory free: the nodes' GPUs are GB10s on unified memory, so
# free memory is a per-node fact (checked by plan and preflight), not whatever this machine has now.
SPARK_MEMINFO = (
    "MemTotal:       125514352 kB\nMemFree:       119773408 kB\nMemAvailable:   121873408 kB\n"
    "Buffers:          112640 kB\nCached:          2048000 kB\nSwapCached:            0 kB\n"
)

__all__ = [
    "Lab",
    "LabNode",
    "LabError",
    "LabUnavailable",
    "unavailable_reason",
    "fingerprint",
    "rdma_name",
    "teardown",
    "reap_stale",
    "list_labs",
    "SIM_IMAGE",
    "NODE_PATH",
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SIM_BUILDER = REPO / "tools" / "build_sim_image.py"
SHIMS = HERE / "shims"
NODE_INIT = HERE / "node_init.sh"

SIM_IMAGE = "sparktui/engine-sim:latest"
# A root shell on a Debian node: /usr/local/sbin first. The nodes' /usr/local/sbin holds the shims
# and a `docker` that is Debian's 20.10 client: this machine's /usr/local/bin/docker is a 28.x client
# that downgrades its API for the 20.10 daemon but keeps 28.x output formats; a real node runs the
# client that matches its daemon, so the lab does too (and a login shell's PATH finds it first).
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MGMT_IFACE = "enP7s7"  # the Spark's 10 GbE management NIC
FABRIC_IFACES = ("enp1s0f1np1", "enP2p1s0f1np1", "enp1s0f0np0", "enP2p1s0f0np0")  # differ per node
WLAN_IFACE = "wlan0"
MGMT_NET, FABRIC_NET, WLAN_NET = 0, 100, 200  # third octet inside the lab's 10.X.0.0/16
# fresh: the twin half down and unaddressed (a new Spark); sync: both halves on their own /24 (NVIDIA Sync)
LAYOUTS = ("fresh", "sync")
TOOLS = (
    "ip",
    "nsenter",
    "unshare",
    "setpriv",
    "mount",
    "tini",
    "bash",
    "ssh",
    "ssh-keygen",
    "/usr/sbin/sshd",
    "dockerd",
    "/usr/bin/docker",
    "/usr/sbin/runc",
    "/usr/bin/python3",
    "busybox",
    "rsync",
)

_seq = itertools.count(1)


class LabUnavailable(Exception):
    """This machine cannot host a lab (not root, a tool missing); str() says why."""


def unavailable_reason(docker: bool = True) -> str | None:
    """Why a lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, mounts, sshd, dockerd)"
    tools = [t for t in TOOLS if docker or t not in ("dockerd", "/usr/bin/docker", "/usr/sbin/runc")]
    missing = [t for t in tools if not (Path(t).exists() if t.startswith("/") else shutil.which(t))]
    if missing:
        return "missing on this machine: " + ", ".join(missing) + " (.ci/run installs them)"
    return None


@dataclass
class LabNode:
    name: str
    index: int
    mgmt_ip: str
    fabric_ip: str
    fabric_iface: str
    wlan_ip: str
    rdma: str  # RoCE device that ibdev2netdev maps to fabric_iface
    netns: str
    dir: str  # this node's files on the host: root/, models/, tmp/, docker/, sbin/, lab/ (= /run/lab)
    cgroup: str  # dockerd's --cgroup-parent
    pid: int = 0  # the node's PID 1 (tini), as this machine sees it
    host_key: str = ""  # "ssh-ed25519 AAAA..." of the node's sshd
    root_key: str = ""  # public key of the node's own root key pair (/root/.ssh/id_ed25519)
    mgmt_iface: str = MGMT_IFACE
    wlan_iface: str = WLAN_IFACE
    twin_iface: str = ""  # the port's other half: no address, down (a fresh Spark's state)
    twin_rdma: str = ""

    @property
    def twin_ip(self) -> str:
        """The address NVIDIA's playbook gives the twin: the fabric address on the next /24."""
        a, b, c, d = self.fabric_ip.split(".")
        return f"{a}.{b}.{int(c) + 1}.{d}"

    @property
    def path(self) -> Path:
        return Path(self.dir)


class Lab:
    """N lab nodes (node1 is the head), their subnets, SSH material and a sparktui config.

    Build with `Lab(nodes=2).up()` or `with Lab() as lab:`; `destroy()` undoes everything.
    `own_process=False` (the `python3 -m tests.lab up` case) lets the lab outlive this process.
    """

    def __init__(
        self,
        nodes: int = 2,
        *,
        max_sessions: int | None = None,
        docker: bool = True,
        model: str = "tiny-model",
        connect_timeout: float = 3.0,
        own_process: bool = True,
        base_dir: str | Path | None = None,
        storage: str = "vfs",
        docker_tmpfs: str = "",
        layout: str = "fresh",
    ):
        if not 1 <= nodes <= len(FABRIC_IFACES) * 4:
            raise ValueError(f"nodes must be 1..{len(FABRIC_IFACES) * 4}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}")
        self.layout = layout
        self.count = nodes
        self.max_sessions = max_sessions
        self.docker = docker
        # vfs copies the whole image at every container start: seconds for the simulator's 40 MB, minutes for
        # a real engine's 2 GB, whose lab asks for overlay2 (a node's mount namespace can mount overlayfs)
        self.storage = storage
        self.docker_tmpfs = docker_tmpfs  # e.g. "6g": each node's /var/lib/docker in memory ("" = on disk)
        self.model = model
        self.connect_timeout = connect_timeout
        self.own_process = own_process
        self.base_dir = Path(base_dir or BASE_DIR)
        self.nodes: list[LabNode] = []
        self.dir: Path | None = None
        self.block = ""  # "10.X"
        self.state: dict = {}
        self._procs: list[subprocess.Popen] = []
        self._destroyed = False
        self._images: set[tuple[str, str]] = set()  # (tag, node) already on the node

    # -- public properties ----------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self._p("sparktui.yaml")

    @property
    def known_hosts(self) -> Path:
        return self._p("known_hosts")

    @property
    def identity(self) -> Path:
        return self._p("id_ed25519")

    @property
    def mgmt_subnet(self) -> str:
        return f"{self.block}.{MGMT_NET}.0/24"

    @property
    def fabric_subnet(self) -> str:
        return f"{self.block}.{FABRIC_NET}.0/24"

    @property
    def twin_subnet(self) -> str:
        """The second half's subnet (addressed from the start with layout="sync", else by twin_up)."""
        return f"{self.block}.{FABRIC_NET + 1}.0/24"

    @property
    def wlan_subnet(self) -> str:
        return f"{self.block}.{WLAN_NET}.0/24"

    @property
    def host_ip(self) -> str:
        """This machine's address on the management subnet."""
        return f"{self.block}.{MGMT_NET}.1"

    @property
    def head(self) -> LabNode:
        return self.nodes[0]

    def node(self, node: str | LabNode) -> LabNode:
        if isinstance(node, LabNode):
            return node
        for n in self.nodes:
            if n.name == node:
                return n
        raise KeyError(node)

    def __getitem__(self, name: str) -> LabNode:
        return self.node(name)

    def _p(self, name: str) -> Path:
        if self.dir is None:
            raise LabError("the lab is not up")
        return self.dir / name

    # -- life cycle -----------------------------------------------------------------------------
    def __enter__(self) -> "Lab":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.destroy()

    def up(self) -> "Lab":
        reason = unavailable_reason(self.docker)
        if reason:
            raise LabUnavailable(reason)
        reap_stale(self.base_dir)
        t0 = time.monotonic()
        seq = next(_seq)
        pid = os.getpid()
        lab_id = f"{pid}-{seq}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"sparktui-lab-{lab_id}-", dir=self.base_dir))
        self.dir.chmod(0o755)
        self.state = {
            "id": lab_id,
            "dir": str(self.dir),
            "owner_pid": pid if self.own_process else None,
            "owner_start": start_time(pid) if self.own_process else None,
            "tag": f"s{pid:x}{seq % 256:02x}",
            "netns": [],
            "links": [],
            "routes": [],
            "nodes": [],
            "max_sessions": self.max_sessions,
            "docker": self.docker,
            "storage": self.storage,
            "docker_tmpfs": self.docker_tmpfs,
            "layout": self.layout,
        }
        if self.own_process:
            atexit.register(self.destroy)
            _install_sigterm()
        try:
            self._save()
            self._network()
            self._files()
            self._start_nodes()
            self._save()
            self.write_config(self.config_data(), self.config_path)
        except BaseException:
            self.destroy()
            raise
        self.state["up_seconds"] = round(time.monotonic() - t0, 2)
        self._save()
        return self

    def destroy(self) -> None:
        """Stop every process the lab started; remove namespaces, links, routes, cgroups, files."""
        if self._destroyed or not self.state:
            return
        self._destroyed = True
        teardown(self.state)
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.own_process:
            atexit.unregister(self.destroy)

    @classmethod
    def attach(cls, lab_dir: str | Path) -> "Lab":
        """A Lab object for a lab that is already up (started by `python3 -m tests.lab up`)."""
        state = json.loads((Path(lab_dir) / "lab.json").read_text())
        lab = cls(
            len(state["nodes"]),
            max_sessions=state.get("max_sessions"),
            docker=state.get("docker", True),
            own_process=False,
            storage=state.get("storage", "vfs"),
            docker_tmpfs=state.get("docker_tmpfs", ""),
            layout=state.get("layout", "fresh"),
        )
        lab.state, lab.dir, lab.block = state, Path(state["dir"]), state["block"]
        lab.nodes = [LabNode(**n) for n in state["nodes"]]
        return lab

    def _save(self) -> None:
        self.state["nodes"] = [asdict(n) for n in self.nodes]
        self.state["block"] = self.block
        tmp = self._p("lab.json.tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        tmp.replace(self._p("lab.json"))

    # -- network --------------------------------------------------------------------------------
    def _network(self) -> None:
        st, tag = self.state, self.state["tag"]
        with machine_lock():
            self.block = free_block()
            # Claim the block first: other labs see it routed and pick another one.
            for cidr in (f"{self.block}.0.0/16", self.fabric_subnet, self.wlan_subnet):
                run(["ip", "route", "add", "unreachable", cidr])
                st["routes"].append(f"unreachable {cidr}")
            self._save()
        base = f"sparktui-{st['id']}"
        sw, bh = f"{base}-fabric", f"{base}-wlan"
        st["switch"] = sw
        for i in range(1, self.count + 1):
            iface = FABRIC_IFACES[(i - 1) % len(FABRIC_IFACES)]
            if i > len(FABRIC_IFACES):
                iface = f"enp{i}s0f1np1"
            d = self.dir / f"node{i}"
            twin = twin_name(iface)
            self.nodes.append(
                LabNode(
                    name=f"node{i}",
                    index=i,
                    mgmt_ip=f"{self.block}.{MGMT_NET}.{10 + i}",
                    fabric_ip=f"{self.block}.{FABRIC_NET}.{10 + i}",
                    fabric_iface=iface,
                    wlan_ip=f"{self.block}.{WLAN_NET}.{10 + i}",
                    rdma=rdma_name(iface),
                    netns=f"{base}-node{i}",
                    dir=str(d),
                    cgroup=f"sparktui-lab-{st['id']}-node{i}",
                    twin_iface=twin,
                    twin_rdma=rdma_name(twin),
                )
            )
        for ns in [sw, bh] + [n.netns for n in self.nodes]:
            run(["ip", "netns", "add", ns])
            st["netns"].append(ns)
        self._save()
        bridge = f"{tag}br"
        st["links"].append(bridge)
        root = [f"link add {bridge} type bridge", f"link set {bridge} up", f"addr add {self.host_ip}/24 dev {bridge}"]
        switch = ["link set lo up", "link add br0 type bridge", "link set br0 up"]
        hole = ["link set lo up"]
        for n in self.nodes:
            i = n.index
            root += [
                f"link add {tag}m{i} type veth peer name {n.mgmt_iface} netns {n.netns}",
                f"link set {tag}m{i} master {bridge} up",
            ]
            switch += [
                f"link add port{i} type veth peer name {n.fabric_iface} netns {n.netns}",
                f"link add port{i}b type veth peer name {n.twin_iface} netns {n.netns}",
                f"link set port{i} mtu 9000",
                f"link set port{i}b mtu 9000",
                f"link set port{i} master br0 up",
                f"link set port{i}b master br0 up",
            ]
            hole += [
                f"link add {n.wlan_iface}-{n.name} type veth peer name {n.wlan_iface} netns {n.netns}",
                f"link set {n.wlan_iface}-{n.name} up",
            ]
        ip_batch(root)
        ip_batch(switch, sw)
        ip_batch(hole, bh)
        for n in self.nodes:
            lines = ["link set lo up"]
            addrs = [(n.mgmt_iface, n.mgmt_ip), (n.fabric_iface, n.fabric_ip), (n.wlan_iface, n.wlan_ip)]
            if self.layout == "sync":
                addrs.append((n.twin_iface, n.twin_ip))
            for dev, ip in addrs:
                lines += [f"addr add {ip}/24 dev {dev}", f"link set {dev} up"]
            for other in self.nodes:  # peers' wlan addresses "resolve" but lead into the blackhole
                if other is not n:
                    lines.append(
                        f"neigh replace {other.wlan_ip} lladdr 02:00:00:00:c8:{other.index:02x} "
                        f"dev {n.wlan_iface} nud permanent"
                    )
            ip_batch(lines, n.netns)

    # -- files ----------------------------------------------------------------------------------
    def _files(self) -> None:
        keygen(self.identity, "sparktui-lab-client")
        client_pub = self.identity.with_suffix(".pub").read_text()
        for mnt in ("/models", "/var/lib/docker"):  # mount points for the nodes' own directories
            Path(mnt).mkdir(parents=True, exist_ok=True)
        for n in self.nodes:
            d = n.path
            for sub in ("root/.ssh", "models", "tmp", "docker", "sbin", "lab", "cgroup"):
                (d / sub).mkdir(parents=True, exist_ok=True)
            (d / "root").chmod(0o700)
            (d / "root/.ssh").chmod(0o700)
            (d / "tmp").chmod(0o1777)
            ak = d / "root/.ssh/authorized_keys"
            ak.write_text(client_pub)
            ak.chmod(0o600)
            keygen(d / "root/.ssh/id_ed25519", f"root@{n.name}")
            n.root_key = (d / "root/.ssh/id_ed25519.pub").read_text().strip()
            keygen(d / "lab/ssh_host_ed25519_key", f"root@{n.name}")
            n.host_key = " ".join((d / "lab/ssh_host_ed25519_key.pub").read_text().split()[:2])
            for shim in SHIMS.iterdir():
                shutil.copy2(shim, d / "sbin" / shim.name)
            (d / "sbin/docker").symlink_to("/usr/bin/docker")
            (d / "lab/rdma").write_text(f"{n.rdma} {n.fabric_iface}\n{n.twin_rdma} {n.twin_iface}\n")
            (d / "lab/meminfo").write_text(SPARK_MEMINFO)  # node_init.sh binds it over /proc/meminfo
            uid = hashlib.sha256(f"{self.state['id']}/{n.name}".encode()).hexdigest()
            (d / "lab/gpu-uuid").write_text(f"GPU-{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}\n")
            self._write_sshd_config(n, self.max_sessions)
        self.known_hosts.write_text("".join(f"{n.mgmt_ip} {n.host_key}\n" for n in self.nodes))
        self._save()

    def _write_sshd_config(self, n: LabNode, max_sessions: int | None) -> None:
        lines = [
            "Port 22",
            "ListenAddress 0.0.0.0",
            "AddressFamily inet",
            "HostKey /run/lab/ssh_host_ed25519_key",
            "PidFile /run/lab/sshd.pid",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "AuthorizedKeysFile .ssh/authorized_keys",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            # Tests open many connections at once; the default 10:30:100 would drop some.
            "MaxStartups 200:30:400",
            "LoginGraceTime 20",
            f"SetEnv PATH={NODE_PATH}",
            "Subsystem sftp internal-sftp",
        ]
        if max_sessions is not None:
            lines.append(f"MaxSessions {int(max_sessions)}")
        (n.path / "lab/sshd_config").write_text("\n".join(lines) + "\n")

    # -- nodes ----------------------------------------------------------------------------------
    def _start_nodes(self) -> None:
        for n in self.nodes:  # in this thread: the parent-death signal follows the spawning thread
            self._spawn_init(n)
        self._save()

        def services(n: LabNode) -> None:
            # Carrier and operstate settle a moment after the links are set up; tests expect "up".
            devs = " ".join((n.mgmt_iface, n.fabric_iface, n.wlan_iface))
            self.sh(
                n,
                f"for i in $(seq 200); do ok=1; for d in {devs}; do "
                '[ "$(cat /sys/class/net/$d/operstate)" = up ] || ok=0; done; '
                "[ $ok = 1 ] && exit 0; sleep 0.05; done; ip -br link >&2; exit 1",
            )
            self.start_sshd(n)
            if self.docker:
                self._start_dockerd(n)

        with ThreadPoolExecutor(max_workers=self.count) as pool:
            list(pool.map(services, self.nodes))

    def _spawn_init(self, n: LabNode) -> None:
        argv = [
            "nsenter",
            f"--net=/run/netns/{n.netns}",
            "--",
            "unshare",
            "--mount",
            "--uts",
            "--pid",
            "--fork",
            "--propagation",
            "private",
            "--kill-child",
            shutil.which("tini") or "tini",
            "-s",
            "--",
            "bash",
            str(NODE_INIT),
            n.dir,
            n.name,
            self.docker_tmpfs,
        ]
        if self.own_process and threading.current_thread() is threading.main_thread():
            argv = ["setpriv", "--pdeathsig", "KILL", "--"] + argv
        log = open(n.path / "lab/init.log", "wb")
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, start_new_session=True
        )
        log.close()
        self._procs.append(proc)
        self.state.setdefault("holders", []).append(proc.pid)
        line = readline_within(proc.stdout, 20)
        proc.stdout.close()
        if line.strip() != "ready":
            err = (n.path / "lab/init.log").read_text(errors="replace").strip()
            raise LabError(f"{n.name} did not start: {err or 'no output'}")
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if not children:
            raise LabError(f"{n.name}: its init process vanished")
        n.pid = int(children[0])

    def _start_dockerd(self, n: LabNode) -> None:
        args = [
            "dockerd",
            f"--storage-driver={self.storage}",
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--bridge=none",
            "--userland-proxy=false",
            "--exec-opt",
            "native.cgroupdriver=cgroupfs",
            f"--cgroup-parent=/{n.cgroup}",
            "--add-runtime",
            "runc-clamp=/usr/local/sbin/runc-clamp",
            "--default-runtime",
            "runc-clamp",
            "--data-root",
            "/var/lib/docker",
            "--exec-root",
            "/run/docker",
            "--pidfile",
            "/run/docker.pid",
            "-H",
            "unix:///run/docker.sock",
            "--shutdown-timeout",
            "3",
        ]
        # One shell: start it detached (tini adopts it), then wait for the API with a bound.
        self.sh(
            n,
            f"setsid {shlex.join(args)} </dev/null >/run/lab/dockerd.log 2>&1 &\n"
            "for i in $(seq 300); do docker version >/dev/null 2>&1 && exit 0; sleep 0.1; done\n"
            "tail -n 20 /run/lab/dockerd.log >&2; exit 1",
            timeout=60,
        )

    def start_sshd(self, node: str | LabNode, max_sessions: int | None = None) -> None:
        """(Re)start the node's sshd; max_sessions sets MaxSessions (None = the lab's setting)."""
        n = self.node(node)
        self._write_sshd_config(n, self.max_sessions if max_sessions is None else max_sessions)
        self.stop_sshd(n)
        # sshd writes its pid file once it listens; wait for that, with a bound.
        self.sh(
            n,
            "/usr/sbin/sshd -f /run/lab/sshd_config -E /run/lab/sshd.log || exit 1\n"
            "for i in $(seq 200); do [ -s /run/lab/sshd.pid ] && exit 0; sleep 0.05; done\n"
            "tail -n 20 /run/lab/sshd.log >&2; exit 1",
            timeout=30,
        )

    def stop_sshd(self, node: str | LabNode) -> None:
        """Stop the node's sshd listener (new connections are refused; open connections stay)."""
        self.sh(
            node,
            "[ -s /run/lab/sshd.pid ] || exit 0\n"
            'p=$(cat /run/lab/sshd.pid); kill "$p" 2>/dev/null\n'
            'for i in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done\n'
            'rm -f /run/lab/sshd.pid; ! kill -0 "$p" 2>/dev/null',
            timeout=30,
        )

    # -- commands on a node ---------------------------------------------------------------------
    def set_meminfo(self, node: str | LabNode, text: str = "") -> None:
        """What the node's /proc/meminfo says from now on (empty: a Spark with its memory free).
        Rewritten in place: the bind over /proc/meminfo follows the file, not its name."""
        with open(self.node(node).path / "lab/meminfo", "r+", encoding="utf-8") as f:
            f.truncate(0)
            f.write(text or SPARK_MEMINFO)

    def sh(
        self,
        node: str | LabNode,
        cmd: str | Sequence[str],
        check: bool = True,
        timeout: float = 60,
        input: str | bytes | None = None,
        stdin: IO | None = None,
    ) -> subprocess.CompletedProcess:
        """Run cmd as root inside the node (a str goes to bash -c); text out unless input is bytes."""
        n = self.node(node)
        if not n.pid or not alive(n.pid):
            raise LabError(f"{n.name} is not running")
        argv = [
            "nsenter",
            "-t",
            str(n.pid),
            "-n",
            "-m",
            "-u",
            "-p",
            "--wdns=/root",
            "env",
            "-i",
            f"PATH={NODE_PATH}",
            "HOME=/root",
            "USER=root",
            "LOGNAME=root",
            "LANG=C.UTF-8",
            "SHELL=/bin/bash",
        ]
        argv += ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        text = not isinstance(input, bytes)
        kw = {"input": input} if input is not None else {"stdin": stdin if stdin is not None else subprocess.DEVNULL}
        r = subprocess.run(argv, capture_output=True, text=text, timeout=timeout, **kw)
        if check and r.returncode != 0:
            err = r.stderr if text else r.stderr.decode(errors="replace")
            shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
            raise LabError(f"{n.name}: `{shown}` exited {r.returncode}: {err.strip()}")
        return r

    def on_each(
        self, cmd: str | Sequence[str], nodes: Sequence[str | LabNode] | None = None, **kw
    ) -> dict[str, subprocess.CompletedProcess]:
        """sh() on several nodes at once; node name -> result."""
        targets = [self.node(n) for n in (nodes or self.nodes)]
        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            results = pool.map(lambda n: self.sh(n, cmd, **kw), targets)
            return {n.name: r for n, r in zip(targets, results)}

    # -- faults and setup ----------------------------------------------------------------------
    def link_down(self, node: str | LabNode) -> None:
        """Unplug the node's fabric cable: its interface stays configured but loses carrier."""
        self._switch_port(node, "down")

    def link_up(self, node: str | LabNode) -> None:
        self._switch_port(node, "up")

    def mgmt_link_down(self, node: str | LabNode) -> None:
        """Unplug the node's management cable (this machine's side): SSH to it stalls, then fails."""
        run(["ip", "link", "set", f"{self.state['tag']}m{self.node(node).index}", "down"])

    def mgmt_link_up(self, node: str | LabNode) -> None:
        run(["ip", "link", "set", f"{self.state['tag']}m{self.node(node).index}", "up"])

    def set_mtu(self, node: str | LabNode, mtu: int, iface: str | None = None) -> None:
        """`ip link set IF mtu N` on the node (its fabric interface by default), as a user fixing it would."""
        n = self.node(node)
        self.sh(n, ["ip", "link", "set", iface or n.fabric_iface, "mtu", str(mtu)])

    def twin_up(self, node: str | LabNode) -> None:
        """NVIDIA's fix for the idle half: the twin gets its own /24 and is brought up."""
        n = self.node(node)
        self.sh(n, f"ip addr add {n.twin_ip}/24 dev {n.twin_iface} && ip link set {n.twin_iface} up")

    def twin_link_down(self, node: str | LabNode) -> None:
        """Unplug the node's second half only: the twin loses carrier, the first half keeps working."""
        self._switch_port(node, "down", "b")

    def twin_link_up(self, node: str | LabNode) -> None:
        self._switch_port(node, "up", "b")

    def _switch_port(self, node: str | LabNode, state: str, half: str = "") -> None:
        n = self.node(node)
        run(["ip", "-n", self.state["switch"], "link", "set", f"port{n.index}{half}", state])

    def trust(self, src: str | LabNode, dst: str | LabNode) -> None:
        """Let root on src ssh to dst over the fabric: src's key on dst, dst's host key known to src."""
        s, d = self.node(src), self.node(dst)
        add_line(d.path / "root/.ssh/authorized_keys", s.root_key)
        add_line(s.path / "root/.ssh/known_hosts", f"{d.fabric_ip} {d.host_key}")

    def untrust(self, src: str | LabNode, dst: str | LabNode) -> None:
        s, d = self.node(src), self.node(dst)
        drop_line(d.path / "root/.ssh/authorized_keys", s.root_key)
        drop_line(s.path / "root/.ssh/known_hosts", f"{d.fabric_ip} {d.host_key}")

    def mount_tmpfs(self, node: str | LabNode, path: str, size: str) -> None:
        """A small filesystem at path on the node (e.g. to run a disk full); gone with the node."""
        self.sh(node, ["sh", "-c", 'mkdir -p "$1" && mount -t tmpfs -o size="$2" tmpfs "$1"', "sh", path, size])

    def umount(self, node: str | LabNode, path: str) -> None:
        self.sh(node, ["umount", path])

    def load_image(self, tarball: str | Path, nodes: Sequence[str | LabNode] | None = None) -> None:
        """`docker load` a `docker save` tarball on the nodes (all by default), concurrently."""
        self._feed(tarball, ["docker", "load", "-q"], nodes)

    def import_image(self, tarball: str | Path, tag: str, nodes: Sequence[str | LabNode] | None = None) -> None:
        """`docker import` a root filesystem tarball as tag on the nodes."""
        self._feed(tarball, ["docker", "import", "-", tag], nodes)

    def tiny_image(self, nodes: Sequence[str | LabNode] | None = None) -> str:
        """A busybox image on the nodes (made once per lab); returns its tag."""
        tar = self._p("tiny-rootfs.tar")
        if not tar.exists():
            tinyimage.build(tar)
        todo = self._missing(tinyimage.TAG, nodes)
        if todo:
            self.import_image(tar, tinyimage.TAG, todo)
            self._images.update((tinyimage.TAG, n.name) for n in todo)
        return tinyimage.TAG

    def sim_image(self, nodes: Sequence[str | LabNode] | None = None) -> str:
        """The engine simulator image (tools/build_sim_image.py) loaded on the nodes; returns its tag."""
        tar = self._p("engine-sim.tar")
        if not tar.exists():
            run([sys.executable, str(SIM_BUILDER), "-o", str(tar), "-t", SIM_IMAGE], timeout=300)
        todo = self._missing(SIM_IMAGE, nodes)
        if todo:
            self.load_image(tar, todo)
            self._images.update((SIM_IMAGE, n.name) for n in todo)
        return SIM_IMAGE

    def _missing(self, tag: str, nodes) -> list[LabNode]:
        return [n for n in (self.node(x) for x in (nodes or self.nodes)) if (tag, n.name) not in self._images]

    def _feed(self, tarball: str | Path, argv: list[str], nodes) -> None:
        def one(n: LabNode) -> None:
            with open(tarball, "rb") as f:
                self.sh(n, argv, stdin=f, timeout=600)

        targets = [self.node(n) for n in (nodes or self.nodes)]
        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            list(pool.map(one, targets))

    def set_gpu(self, node: str | LabNode, field: str, value: str | None) -> None:
        """Make the node's nvidia-smi report value for field (None restores the default)."""
        if value is None:
            self.sh(node, ["rm", "-f", f"/run/nvidia-sim/{field}"])
        else:
            self.sh(node, ["sh", "-c", 'printf %s "$2" > "/run/nvidia-sim/$1"', "sh", field, value])

    def ssh_argv(self, node: str | LabNode, *cmd: str, host: str | None = None) -> list[str]:
        """OpenSSH client argv reaching the node as root with the lab key, verifying its host key."""
        n = self.node(node)
        return [
            "ssh",
            "-F",
            "/dev/null",
            "-i",
            str(self.identity),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "ConnectTimeout=5",
            f"root@{host or n.mgmt_ip}",
            *cmd,
        ]

    def host_key_fingerprint(self, node: str | LabNode) -> str:
        return fingerprint(self.node(node).host_key)

    # -- config ---------------------------------------------------------------------------------
    def config_data(self) -> dict:
        """A fresh dict of the lab's sparktui config (edit it and pass it to write_config)."""
        return {
            "cluster": f"lab-{self.state['id']}",
            "nodes": [
                {
                    "name": n.name,
                    "host": n.mgmt_ip,
                    "user": "root",
                    "port": 22,
                    "identity_file": str(self.identity),
                    "role": "head" if n.index == 1 else "worker",
                }
                for n in self.nodes
            ],
            "model": {"name": self.model, "path": f"/models/{self.model}"},
            "images": {"sglang": SIM_IMAGE, "vllm": SIM_IMAGE},
            "docker": {"gpu_style": "gpus-all"},
            # ssh_config: [] keeps the user's ~/.ssh/config out of the lab
            "ssh": {
                "host_key_policy": "strict",
                "known_hosts": str(self.known_hosts),
                "connect_timeout": self.connect_timeout,
                "ssh_config": [],
            },
        }

    def write_config(self, data: dict, path: str | Path | None = None) -> Path:
        """Write a config dict as YAML (default: a new file in the lab dir); returns its path."""
        if path is None:
            fd, name = tempfile.mkstemp(prefix="config-", suffix=".yaml", dir=self.dir)
            os.close(fd)
            path = name
        path = Path(path)
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        return path


def _install_sigterm() -> None:
    """SIGTERM ends this process through SystemExit, so atexit tears the lab down."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(128 + signal.SIGTERM)))
