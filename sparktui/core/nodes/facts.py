"""What sparktui knows about a node, as plain dataclasses (filled by probes.py, read by everyone).

Field names follow the stable `--json` shape of `sparktui check` / `status`; None means unknown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..plan.image import ImageInfo


@dataclass
class Gpu:
    name: str | None = None
    count: int = 0
    memory_total_bytes: int | None = None  # None on GB10 (nvidia-smi says [N/A]); unified memory is in Memory
    utilization: float | None = None  # percent, first GPU
    unified: bool = False  # GPU shares system memory (GB10): usable memory comes from /proc/meminfo


@dataclass
class Memory:
    total_bytes: int | None = None
    available_bytes: int | None = None  # MemAvailable: free + what the kernel can reclaim (page cache)
    free_bytes: int | None = None  # MemFree: what a GPU on unified memory sees as free (cudaMemGetInfo)
    cached_bytes: int | None = None  # page cache (Cached + Buffers): freed by dropping caches


@dataclass
class Interface:
    name: str
    ipv4: list[str] = field(default_factory=list)  # CIDRs, e.g. "192.168.100.10/24"
    up: bool = False
    rdma: str | None = None  # RoCE device mapped by ibdev2netdev, e.g. "rocep1s0f1"
    speed_mbps: int | None = None
    state: str = ""  # why not up, in words: "link down" (set down) | "no carrier" (cable, switch port); "" when up
    mtu: int | None = None  # from `ip -j addr`
    link_type: str = ""  # `ip -j addr`'s link_type: "ether" (RoCE on a ConnectX), "infiniband", ...
    pci: str | None = None  # the RDMA device's PCI address (sysfs), e.g. "0002:01:00.1"
    gid_index: int | None = None  # the RDMA device's RoCEv2 GID holding an IPv4 address (sysfs gid_attrs)


@dataclass
class Container:
    id: str
    name: str
    image: str
    state: str  # running | exited | ...
    status: str  # docker's human text, e.g. "Up 3 minutes"
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class ModelDir:
    path: str
    present: bool = False  # a whole checkpoint: the directory is there and no unverified copy is under way
    bytes: int | None = None
    files: int | None = None
    incomplete: str | None = None  # why the directory is there but not whole (a copy cut off or unverified)

    @property
    def state(self) -> str:
        """present | incomplete | missing, as every front says it."""
        return "present" if self.present else "incomplete" if self.incomplete else "missing"


@dataclass
class DockerInfo:
    version: str | None = None
    images: dict[str, str] = field(default_factory=dict)  # "repo:tag" -> image ID (sha256:...)
    runtimes: list[str] = field(default_factory=list)  # `docker info` runtimes, e.g. ["nvidia", "runc"]
    problem: str | None = None  # why `docker version` failed for the SSH user (daemon down, permission)


@dataclass
class NodeFacts:
    name: str
    host: str
    reachable: bool = False
    error: str | None = None
    gpu: Gpu = field(default_factory=Gpu)
    memory: Memory = field(default_factory=Memory)
    disk_free_bytes: int | None = None  # free space at the model path (or its nearest existing parent)
    interfaces: list[Interface] = field(default_factory=list)
    docker: DockerInfo = field(default_factory=DockerInfo)
    containers: list[Container] = field(default_factory=list)
    model: ModelDir | None = None
    infiniband: bool = False  # /dev/infiniband exists (pass it to containers)
    user: str | None = None  # the SSH user on the node (`id -un`)
    rsync: str | None = None  # rsync's version; None = not installed
    gpu_toolkit: list[str] = field(default_factory=list)  # NVIDIA container tools on PATH (the --gpus hook)
    cdi_specs: list[str] = field(default_factory=list)  # CDI spec files naming nvidia.com/gpu
    tools_probed: bool = False  # the probe got as far as rsync and the toolkit (the last sections)
    notes: list[str] = field(default_factory=list)  # what the probe could not read, and why
    images: dict[str, ImageInfo] = field(default_factory=dict)  # image ref -> what it holds (inspected before a plan)

    def to_json(self) -> dict:
        d = asdict(self)
        # speed, link state, unified memory and the image IDs too: a saved `check --json` is enough to
        # plan from (`plan --facts FILE`, facts_store.py reads this shape back)
        d["interfaces"] = [
            {
                "name": i.name,
                "ipv4": i.ipv4,
                "up": i.up,
                "rdma": i.rdma,
                "speed_mbps": i.speed_mbps,
                "state": i.state,
                "mtu": i.mtu,
                "link_type": i.link_type,
                "pci": i.pci,
                "gid_index": i.gid_index,
            }
            for i in self.interfaces
        ]
        d["gpu"] = {k: d["gpu"][k] for k in ("name", "count", "memory_total_bytes", "utilization", "unified")}
        d["docker"] = {
            "version": self.docker.version,
            "runtimes": self.docker.runtimes,
            "problem": self.docker.problem,
            "images": dict(self.docker.images),
        }
        if self.model is not None:
            d["model"]["state"] = self.model.state
        return d

    def usable_gpu_memory(self) -> int | None:
        """Memory one GPU can use: its own on discrete cards, system memory on unified (GB10)."""
        if self.gpu.memory_total_bytes:
            return self.gpu.memory_total_bytes
        if self.gpu.count and self.memory.total_bytes:
            return self.memory.total_bytes
        return None


@dataclass
class NodeAddr:
    """A node's place on one subnet."""

    iface: str
    ip: str  # bare address, no prefix length
    rdma: str | None = None  # RoCE device behind iface, if any


@dataclass
class Subnet:
    """A subnet and how every node joins it (built by network.py)."""

    subnet: str  # CIDR of the network, e.g. "192.168.100.0/24"
    nodes: dict[str, NodeAddr] = field(default_factory=dict)  # node name -> address
    rdma: bool = False  # every node reaches it through an RDMA-capable interface
    up: bool = True  # every node's interface on it is up
    speed_mbps: int | None = None  # slowest known link speed among the nodes
    management: bool = False  # holds the addresses sparktui dials (the default route, not the fabric)
    notes: list[str] = field(default_factory=list)  # problems on this subnet: twins, ignored overrides

    def joins(self, names: list[str]) -> bool:
        return all(n in self.nodes for n in names)

    def to_json(self) -> dict:
        return {
            "subnet": self.subnet,
            "rdma": self.rdma,
            "management": self.management,
            "nodes": {k: {"iface": v.iface, "ip": v.ip, "rdma": v.rdma} for k, v in self.nodes.items()},
        }
