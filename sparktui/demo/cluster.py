"""The simulated cluster: N nodes on this machine, each an SSH server with its own namespaces.

Layout of a demo's directory (tempfile.gettempdir()/sparktui-demo-<id>/, mode 0700; which demos run is
recorded apart, where only their user can write: registry.py):
  demo.json                what the node tools read: nodes, ports, host keys, speed, link rate
  sparktui.yaml            the config sparktui is pointed at
  known_hosts, client/     sparktui's side: the nodes' host keys and its login key
  bin/, container-bin/     the stand-in tools (launchers.py)
  models/                  the model path's parent: empty here, each node binds its own over it
  nodes/<name>/            one node: node.json, home/ (HOME, ~/.ssh), models/, docker/, meminfo, pressure-memory,
                           sys-class-net/
Everything the demo started ends in stop(): the servers close and each node's PID 1 exits, which
ends every process of the node (containers, transfers); the directory goes unless `keep`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.remote.sshlib import asyncssh
from . import checkpoint, configfile, hardware, launchers, proc, registry
from .docker import images as docker_images
from .docker.store import Store
from .errors import DemoError
from .namespaces import NodeNamespace, check_namespaces
from .sshserver import LocalSshServer

PREFIX = "sparktui-demo-"
STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class DemoOptions:
    nodes: int = 2
    scenario: str = "pivot"  # pivot | happy (configfile.SCENARIOS)
    speed: float = 10.0  # engine simulator speed-up
    keep: bool = False  # leave the directory behind at the end
    model_bytes: int = 64 << 20  # real bytes in the checkpoint's shards
    image_bytes: int = docker_images.DEFAULT_PAYLOAD
    link_mb_per_s: float = 32.0  # the senders' pace: transfers take a few seconds, as on a real link
    stream_mb_per_s: float = 0.0  # most one ssh stream carries (one core's worth); 0 = only the link holds it
    trust: bool = True  # nodes already trust each other for transfers (else: `sparktui setup trust`)
    base: str | None = None  # where the demo's directory goes (default: the temp directory)
    background: bool = False  # `demo up`: `demo down` without an id stops it (never an interactive demo)
    layout: str = "fresh"  # hardware.LAYOUTS: "sync" puts each fabric half on a subnet of its own


@dataclass
class DemoNode:
    name: str
    index: int
    dir: Path
    host_key: asyncssh.SSHKey
    port: int = 0
    namespace: NodeNamespace | None = None
    server: LocalSshServer | None = None

    @property
    def home(self) -> Path:
        return self.dir / "home"

    @property
    def addresses(self) -> dict[str, str]:
        return hardware.addresses(self.index)


def _free_port(hosts: list[str]) -> int:
    """A port free on every one of hosts (the node's addresses), found by binding each."""
    for _ in range(50):
        socks = []
        try:
            s = socket.socket()
            s.bind((hosts[0], 0))
            socks.append(s)
            port = s.getsockname()[1]
            for h in hosts[1:]:
                t = socket.socket()
                socks.append(t)
                t.bind((h, port))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise DemoError(f"no free port on {', '.join(hosts)}")


def _free_ports(n: int) -> list[int]:
    """n distinct ports free on every address (the engines' HTTP servers bind 0.0.0.0)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("0.0.0.0", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _pub(key: asyncssh.SSHKey, comment: str | None = None) -> str:
    line = key.export_public_key("openssh").decode().strip()
    return f"{line.split()[0]} {line.split()[1]}" + (f" {comment}" if comment else "")


def _write_private(path: Path, key: asyncssh.SSHKey, comment: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(key.export_private_key("openssh"))
    path.chmod(0o600)
    path.with_name(path.name + ".pub").write_text(_pub(key, comment) + "\n")


class DemoCluster:
    """`async with DemoCluster(DemoOptions()) as demo:` then demo.config_path."""

    def __init__(self, options: DemoOptions | None = None):
        self.options = options or DemoOptions()
        if not 1 <= self.options.nodes <= hardware.MAX_NODES:
            raise DemoError(f"--nodes must be between 1 and {hardware.MAX_NODES}")
        if self.options.scenario not in configfile.SCENARIOS:
            raise DemoError(f"unknown scenario {self.options.scenario!r}: {', '.join(configfile.SCENARIOS)}")
        if self.options.speed <= 0:
            raise DemoError("--speed must be above 0")
        self.root: Path | None = None
        self.nodes: list[DemoNode] = []
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.ports: dict[str, int] = {}
        self.started = False
        self._stopped = False
        self._began = time.time()
        self._entry: Path | None = None  # this demo's registry file, removed when it stops

    # -- paths --------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        assert self.root is not None
        return self.root / "sparktui.yaml"

    @property
    def model_path(self) -> str:
        assert self.root is not None
        return str(self.root / "models" / checkpoint.NAME)

    def node_model_dir(self, name: str) -> Path:
        """Where a node's model files lie as this machine sees them (outside the node's namespace)."""
        return self.node(name).dir / "models" / checkpoint.NAME

    def node(self, name: str) -> DemoNode:
        return next(n for n in self.nodes if n.name == name)

    @property
    def id(self) -> str:
        assert self.root is not None
        return self.root.name.removeprefix(PREFIX)

    # -- start --------------------------------------------------------------------------------
    async def start(self) -> "DemoCluster":
        await check_namespaces()
        base = self.options.base or tempfile.gettempdir()
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))  # 0700: it will hold a private key
        try:
            self.root.chmod(0o700)
            self._write_demo_json()  # at once: a sweep by another `demo up` sees the directory is in use
            try:
                self._entry = registry.add(
                    registry.entry_for_self(self.id, self._began, self.root, self.options.background, self.options.keep)
                )
            except OSError as e:
                raise DemoError(f"cannot record the demo in {registry.directory()}: {e}") from None
            await self._start()
        except BaseException:
            await self.stop()
            raise
        self.started = True
        return self

    async def _start(self) -> None:
        root = self.root
        assert root is not None
        o = self.options
        node_bin, _ = launchers.write(root)
        (root / "models").mkdir()
        (root / "client").mkdir(mode=0o700)
        _write_private(root / "client" / "id_ed25519", self.client_key, "sparktui-demo")
        for k in range(1, o.nodes + 1):
            name = f"spark{k}"
            d = root / "nodes" / name
            for sub in ("home/.ssh", "models", "docker"):
                (d / sub).mkdir(parents=True)
            (d / "home" / ".ssh").chmod(0o700)
            (d / "node.json").write_text(json.dumps(hardware.describe(k, name, o.layout), indent=2))
            in_use = configfile.SCENARIO_IN_USE_KB.get(o.scenario, {}).get(k, 0)
            (d / "meminfo").write_text(hardware.meminfo(available_kb=hardware.MEM_AVAILABLE_KB - in_use))
            (d / "pressure-memory").write_text(hardware.PRESSURE_MEMORY)
            (d / "drop_caches").write_text("0\n")  # the node's own; a write drops its page cache (pagecache.py)
            hardware.write_sysfs_net(d / "sys-class-net", k, hardware.interfaces(k, o.layout))
            (d / "sys-class" / "net").mkdir(parents=True)  # the mount point for sys-class-net
            hardware.write_sysfs_ib(d / "sys-class" / "infiniband", hardware.interfaces(k, o.layout))
            docker_images.seed(Store(d / "docker"), list(docker_images.CATALOG), o.image_bytes)
            node = DemoNode(name, k, d, asyncssh.generate_private_key("ssh-ed25519"))
            node.port = _free_port(list(node.addresses.values()))
            self.nodes.append(node)
        checkpoint.write(
            self.node_model_dir(self.nodes[0].name), o.model_bytes, config=configfile.SCENARIO_MODELS.get(o.scenario)
        )
        if o.trust:
            self._trust_each_other()
        else:
            for n in self.nodes:
                (n.home / ".ssh" / "authorized_keys").touch(mode=0o600)
        dist, sglang, vllm, ray, trtllm = _free_ports(5)
        self.ports = {"dist": dist, "sglang": sglang, "vllm": vllm, "ray": ray, "trtllm": trtllm}
        self._write_demo_json()
        self._write_config()
        await asyncio.gather(*(self._start_node(n, node_bin) for n in self.nodes))

    def _trust_each_other(self) -> None:
        """What `sparktui setup trust` would do: each node's key on every node, every node's host key
        (at each of its addresses and its name) in each node's known_hosts."""
        keys = {}
        for n in self.nodes:
            key = asyncssh.generate_private_key("ssh-ed25519")
            _write_private(n.home / ".ssh" / "id_ed25519", key, f"root@{n.name}")
            keys[n.name] = _pub(key, f"root@{n.name}")
        known = "".join(f"{addr} {_pub(p.host_key)}\n" for p in self.nodes for addr in [*p.addresses.values(), p.name])
        for n in self.nodes:
            ak = n.home / ".ssh" / "authorized_keys"
            ak.write_text("".join(k + "\n" for k in keys.values()))
            ak.chmod(0o600)
            (n.home / ".ssh" / "known_hosts").write_text(known)

    def _write_demo_json(self) -> None:
        assert self.root is not None
        o = self.options
        data = {
            "id": self.id,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "started": self._began,
            "start_ticks": proc.start_ticks(os.getpid()),
            "boot_id": proc.boot_id(),
            "background": o.background,
            "keep": o.keep,
            "root": str(self.root),
            "config": str(self.config_path),
            "speed": o.speed,
            "scenario": o.scenario,
            "link_bytes_per_s": o.link_mb_per_s * 1e6,
            "stream_bytes_per_s": o.stream_mb_per_s * 1e6,
            "image_bytes": o.image_bytes,
            "model_path": self.model_path,
            "nodes": [
                {
                    "name": n.name,
                    "index": n.index,
                    "port": n.port,
                    "addresses": n.addresses,
                    "host_key": _pub(n.host_key),
                    "dir": str(n.dir),
                }
                for n in self.nodes
            ],
        }
        (self.root / "demo.json").write_text(json.dumps(data, indent=2))

    def _write_config(self) -> None:
        assert self.root is not None
        kh = self.root / "known_hosts"
        kh.write_text("".join(f"[{n.addresses['mgmt']}]:{n.port} {_pub(n.host_key)}\n" for n in self.nodes))
        entries = [
            configfile.NodeEntry(n.name, n.addresses["mgmt"], n.port, "head" if n.index == 1 else "worker")
            for n in self.nodes
        ]
        text = configfile.render(
            entries,
            identity_file=str(self.root / "client" / "id_ed25519"),
            known_hosts=str(kh),
            model_name=checkpoint.NAME,
            model_path=self.model_path,
            source=self.nodes[0].name,
            speed=self.options.speed,
            scenario=self.options.scenario,
            ports=self.ports,
            hang_after=max(3.0, round(90.0 / self.options.speed, 1)),
        )
        self.config_path.write_text(text)

    def _env(self, n: DemoNode, node_bin: Path) -> dict[str, str]:
        extra = []
        for tool in ("rsync", "ssh", "ssh-keygen", "nsenter", "unshare"):
            where = shutil.which(tool)
            if where and os.path.dirname(where) not in STD_PATH.split(":") + extra:
                extra.append(os.path.dirname(where))
        return {
            "HOME": str(n.home),
            "USER": "root",
            "LOGNAME": "root",
            "SHELL": "/bin/sh",
            "LANG": "C.UTF-8",
            "PATH": ":".join([str(node_bin), STD_PATH, *extra]),
            hardware.NODE_ENV: str(n.dir),
            hardware.ROOT_ENV: str(self.root),
            "SPARKTUI_DEMO_BIN": str(node_bin),
        }

    async def _start_node(self, n: DemoNode, node_bin: Path) -> None:
        assert self.root is not None
        n.namespace = NodeNamespace(
            n.name,
            binds=[(str(n.dir / "models"), str(self.root / "models"))],
            optional=[
                (str(n.dir / "meminfo"), "/proc/meminfo"),
                (str(n.dir / "pressure-memory"), "/proc/pressure/memory"),
                (str(n.dir / "sys-class"), "/sys/class"),
                (str(n.dir / "sys-class-net"), "/sys/class/net"),
                (str(n.dir / "drop_caches"), "/proc/sys/vm/drop_caches"),
            ],
            page_cache=(str(n.dir / "drop_caches"), str(n.dir / "meminfo")),
            rdma_dev=str(n.dir / "dev"),
        )
        await n.namespace.start()
        last: Exception | None = None
        for _ in range(5):  # the port was free a moment ago; someone may have taken it since
            server = LocalSshServer(
                n.host_key,
                [self.client_key],
                host=list(n.addresses.values()),
                port=n.port,
                env=self._env(n, node_bin),
                cwd=n.home,
                prefix=n.namespace.enter_argv(),
                authorized_keys_file=n.home / ".ssh" / "authorized_keys",
                forwarding=True,
                inherit_env=False,
            )
            try:
                n.server = await server.start()
                return
            except OSError as e:
                last = e
                n.port = _free_port(list(n.addresses.values()))
                self._write_demo_json()
                self._write_config()
        raise DemoError(f"{n.name}: cannot listen on {', '.join(n.addresses.values())}: {last}")

    # -- stop ---------------------------------------------------------------------------------
    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for n in self.nodes:
            if n.server is not None:
                with contextlib.suppress(Exception):
                    await n.server.stop()
        await asyncio.gather(
            *(n.namespace.stop() for n in self.nodes if n.namespace is not None), return_exceptions=True
        )
        if self.root is not None and not self.options.keep:
            # the kernel may still be ending a node's last processes: a few tries, briefly
            deadline = time.monotonic() + 5
            while self.root.exists() and time.monotonic() < deadline:
                shutil.rmtree(self.root, ignore_errors=True)
                if self.root.exists():
                    await asyncio.sleep(0.1)
        if self._entry is not None:
            registry.remove(self._entry)

    async def __aenter__(self) -> "DemoCluster":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def summary(self) -> dict:
        return {
            "id": self.id if self.root else None,
            "config": str(self.config_path) if self.root else None,
            "root": str(self.root) if self.root else None,
            "model_path": self.model_path if self.root else None,
            "scenario": self.options.scenario,
            "speed": self.options.speed,
            "nodes": [
                {"name": n.name, "host": n.addresses["mgmt"], "port": n.port, "fabric": n.addresses["fabric"]}
                for n in self.nodes
            ],
        }
