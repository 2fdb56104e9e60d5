"""What each simulated node is: its addresses, NICs, GPU and memory, as data the shims answer from.

Addressing (node k = 1, 2, ...), all on loopback so nothing leaves this machine:
  enP7s7         management (10 GbE)   127.0.0.(10+k)/24   sparktui dials this one
  enp1s0f1np1    fabric (ConnectX-7)   127.0.1.(10+k)/24   RoCE device rocep1s0f1, really reachable
  enP2p1s0f1np1  the port's twin       no address, down    RoCE device roceP2p1s0f1 (the port's other half)
                 (layout "sync": 127.0.3.(10+k)/24 and up, each half on a subnet of its own, as NVIDIA Sync
                 writes a port)
Both fabric halves start at MTU 1500, as a fresh Spark's CX7 netdevs do (dgx-spark-playbooks#25), and
`ip addr add` / `ip link set` on the node change them (tools/ip.py), so the plan's fixes can be played.
  wlan0          Wi-Fi                 127.0.2.(10+k)/24   the network SGLang wanders onto
A node's description is written to NODE_DIR/node.json; the shims read it through $SPARKTUI_DEMO_NODE.
Stdlib only (the shims import it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

NODE_ENV = "SPARKTUI_DEMO_NODE"  # the node's directory, set in every command the node runs
ROOT_ENV = "SPARKTUI_DEMO_ROOT"  # the demo's directory
MAX_NODES = 32  # addresses 127.0.x.11-42; nodes are light (an SSH server on one loop, a namespace each)

GPU_NAME = "NVIDIA GB10"
DRIVER = "580.95.05"
CUDA = "13.0"
MEM_TOTAL_KB = 125_514_352  # a DGX Spark's MemTotal: 119.7 GiB of unified memory
MEM_AVAILABLE_KB = 121_873_408
# a DGX Spark's CPU: 20 Arm cores, 10 Cortex-X925 + 10 Cortex-A725
# (https://docs.nvidia.com/dgx/dgx-spark-porting-guide/overview.html, "CPU Architecture")
CPU_CORES = 20


LAYOUTS = ("fresh", "sync")  # the twin half down and unaddressed (a new Spark), or on its own subnet (NVIDIA Sync)


def addresses(k: int) -> dict[str, str]:
    return {"mgmt": f"127.0.0.{10 + k}", "fabric": f"127.0.1.{10 + k}", "wlan": f"127.0.2.{10 + k}"}


def twin_address(k: int) -> str:
    return f"127.0.3.{10 + k}"


def interfaces(k: int, layout: str = "fresh") -> list[dict]:
    """The node's NICs, in `ip addr` order; ipv4 is [address, prefix] or None."""
    a = addresses(k)
    sync = layout == "sync"
    mac = lambda n: f"4c:bb:47:{k:02x}:{n:02x}:{0x10 + k:02x}"
    return [
        {
            "name": "lo",
            "kind": "loopback",
            "ipv4": ["127.0.0.1", 8],
            "up": True,
            "mac": "00:00:00:00:00:00",
            "mtu": 65536,
        },
        {
            "name": "enP7s7",
            "kind": "ether",
            "ipv4": [a["mgmt"], 24],
            "up": True,
            "mac": mac(1),
            "mtu": 1500,
            "speed": 10000,
        },
        {
            "name": "enp1s0f1np1",
            "kind": "ether",
            "ipv4": [a["fabric"], 24],
            "up": True,
            "mac": mac(2),
            "mtu": 1500,
            "speed": 200000,
            "rdma": "rocep1s0f1",
            "pci": "0000:01:00.1",
        },
        {
            "name": "enP2p1s0f1np1",
            "kind": "ether",
            "ipv4": [twin_address(k), 24] if sync else None,
            "up": sync,
            "mac": mac(3),
            "mtu": 1500,
            "speed": 200000,
            "rdma": "roceP2p1s0f1",
            "pci": "0002:01:00.1",
        },
        {"name": "wlan0", "kind": "ether", "ipv4": [a["wlan"], 24], "up": True, "mac": mac(4), "mtu": 1500},
    ]


def describe(k: int, name: str, layout: str = "fresh") -> dict:
    return {
        "index": k,
        "name": name,
        "hostname": name,
        "addresses": addresses(k),
        "interfaces": interfaces(k, layout),
        "gpu": {
            "name": GPU_NAME,
            "uuid": f"GPU-5a1e{k:04x}-0d3f-4b6e-9c2a-51b0c0de{k:04x}",
            "bus_id": "0000000F:01:00.0",
            "driver": DRIVER,
            "cuda": CUDA,
        },
    }


DEFAULT_ROUTE = "wlan0"  # where a node's default route goes (`ip route`), and the engines' guess without *_HOST_IP


def sim_interfaces(k: int, ifaces: list[dict] | None = None) -> str:
    """SPARKTUI_SIM_INTERFACES for the node: what the engine simulator sees as this machine's NICs.

    lo is given as 127.0.0.1/32: every NIC of every demo node lives in 127.0.0.0/8, and a /8 lo
    would make the simulator count the whole range (other NICs' networks included) as lo's."""
    out = []
    for i in interfaces(k) if ifaces is None else ifaces:
        if i["ipv4"]:
            prefix = 32 if i["kind"] == "loopback" else i["ipv4"][1]
            out.append(f"{i['name']}={i['ipv4'][0]}/{prefix}")
    return ",".join(out)


# the node's /proc/pressure/memory: nothing waits for memory on a simulated node (this machine's own
# pressure is not the node's)
PRESSURE_MEMORY = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


def meminfo(total_kb: int = MEM_TOTAL_KB, available_kb: int = MEM_AVAILABLE_KB) -> str:
    free = available_kb - 2_100_000
    return (
        f"MemTotal:       {total_kb} kB\nMemFree:        {free} kB\nMemAvailable:   {available_kb} kB\n"
        "Buffers:          112640 kB\nCached:          2048000 kB\nSwapCached:            0 kB\n"
        "SwapTotal:      16777212 kB\nSwapFree:       16777212 kB\n"
    )


def write_sysfs_net(dest: Path, k: int, ifaces: list[dict] | None = None) -> None:
    """A stand-in /sys/class/net: one directory per NIC with speed, operstate, address, mtu."""
    for i in interfaces(k) if ifaces is None else ifaces:
        d = dest / i["name"]
        d.mkdir(parents=True, exist_ok=True)
        (d / "operstate").write_text(("up" if i["up"] else "down") if i["kind"] != "loopback" else "unknown")
        (d / "address").write_text(i["mac"] + "\n")
        (d / "mtu").write_text(f"{i['mtu']}\n")
        if i.get("speed"):  # the kernel says -1 for a link without carrier
            (d / "speed").write_text(f"{i['speed'] if i['up'] else -1}\n")


def _gid(ip: str) -> str:
    """An IPv4-mapped GID as sysfs prints it (0000:...:ffff:c0a8:640a)."""
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def write_sysfs_ib(dest: Path, ifaces: list[dict]) -> None:
    """A stand-in /sys/class/infiniband: per RDMA device its PCI device (with its netdev), port state and
    GID table as a CX7 fills it (0/1: link-local v1/v2, 2/3: the IPv4 address v1/v2, so RoCEv2 is 3).
    `device` points into the node's sys-devices/ by absolute path, so readlink -f names the PCI address.
    Without an IPv4 address there are no entries 2 and 3 (the kernel adds them with the address)."""
    devices = dest.parent.parent / "sys-devices"
    for i in ifaces:
        if not i.get("rdma"):
            continue
        dev = dest / i["rdma"]
        pci = devices / (i.get("pci") or "0000:00:00.0")
        (pci / "net" / i["name"]).mkdir(parents=True, exist_ok=True)
        port = dev / "ports" / "1"
        for sub in ("gid_attrs/types", "gids"):
            (port / sub).mkdir(parents=True, exist_ok=True)
        link = dev / "device"
        if not link.is_symlink():
            link.symlink_to(pci)
        (port / "state").write_text("4: ACTIVE\n" if i["up"] else "1: DOWN\n")
        ip = i["ipv4"][0] if i.get("ipv4") else None
        m = [int(x, 16) for x in i["mac"].split(":")]  # EUI-64 from the MAC, as the kernel forms it
        link_local = f"fe80:0000:0000:0000:{m[0] ^ 2:02x}{m[1]:02x}:{m[2]:02x}ff:fe{m[3]:02x}:{m[4]:02x}{m[5]:02x}"
        table = [(link_local, "IB/RoCE v1"), (link_local, "RoCE v2")]
        table += [(_gid(ip), "IB/RoCE v1"), (_gid(ip), "RoCE v2")] if ip else []
        for idx in range(4):
            for f in (port / "gids" / str(idx), port / "gid_attrs" / "types" / str(idx)):
                f.unlink(missing_ok=True)
        for idx, (gid, kind) in enumerate(table):
            (port / "gids" / str(idx)).write_text(gid + "\n")
            (port / "gid_attrs" / "types" / str(idx)).write_text(kind + "\n")


def load() -> dict:
    """The description of the node this process runs on (raises SystemExit outside a demo node)."""
    d = os.environ.get(NODE_ENV)
    if not d:
        raise SystemExit(f"not on a sparktui demo node (${NODE_ENV} is not set)")
    with open(os.path.join(d, "node.json"), encoding="utf-8") as f:
        return json.load(f)


def save(node: dict) -> None:
    """Write the node's description back (after `ip addr add` / `ip link set`), whole or not at all."""
    d = node_dir()
    tmp = d / "node.json.tmp"
    tmp.write_text(json.dumps(node, indent=2))
    tmp.replace(d / "node.json")
    write_sysfs_net(d / "sys-class-net", node["index"], node["interfaces"])
    write_sysfs_ib(d / "sys-class" / "infiniband", node["interfaces"])


def node_dir() -> Path:
    return Path(os.environ[NODE_ENV])


def demo_root() -> Path:
    return Path(os.environ[ROOT_ENV])
