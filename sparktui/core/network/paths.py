"""Bootstrap and data: the two paths a multi-node engine uses, told apart.

NCCL's bootstrap (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, the rendezvous address the engines dial) only
has to join every node; the data moves over the HCAs in NCCL_IB_HCA, whatever subnet those sit on.
NVIDIA's cluster setup (dgx-spark-playbooks, spark_cluster_setup.py run_nccl_test) bootstraps over the
management port (NCCL_SOCKET_IFNAME, UCX_NET_DEVICES, OMPI_MCA_btl_tcp_if_include = enP7s7) and lists the
CX-7 HCAs in NCCL_IB_HCA for the data: a management rendezvous with RDMA data is NVIDIA's setup, not TCP.
What must hold is that every peer can reach the bootstrap address; the engines hang otherwise (SGLang's
rendezvous on an interface peers cannot reach).
Pure functions over Subnets; no SSH here.
"""

from __future__ import annotations

from ..nodes.facts import Subnet


def data_subnet(chosen: Subnet, subnets: list[Subnet], order: list[str]) -> Subnet | None:
    """The subnet whose HCAs carry the data: the rendezvous one when it has RDMA on every node, else the best
    RDMA subnet that is up and joins every node (network.subnets ranks the best first); None: sockets."""
    if chosen.rdma:
        return chosen
    return next((s for s in subnets if s.rdma and s.up and not s.management and s.joins(order)), None)


def split_note(boot: Subnet, data: Subnet) -> str:
    """Said in a plan whose bootstrap and data take different subnets."""
    where = "the management port" if boot.management else boot.subnet
    return (
        f"bootstrap over {where} ({boot.subnet}: NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and the rendezvous "
        f"address), data over RDMA on the fabric {data.subnet} (NCCL_IB_HCA), as NVIDIA's cluster setup "
        f"runs NCCL: every peer reaches {boot.subnet}, and the HCAs carry the tensors"
    )


def gloo_note(boot: Subnet, fabric: Subnet) -> str:
    """Said in a CPU build's plan whose rendezvous is not the fabric: gloo carries the tensors where it
    bootstraps, so the fabric's HCAs carry nothing."""
    where = "the management port" if boot.management else boot.subnet
    return (
        f"collectives over gloo on {where} ({boot.subnet}: GLOO_SOCKET_IFNAME): a CPU build has no NCCL, so the "
        f"fabric {fabric.subnet} carries nothing unless the rendezvous is there (--iface {fabric.subnet})"
    )


def paths_of(
    boot: Subnet, data: Subnet | None, order: list[str], hcas: dict[str, str | None], gloo: bool = False
) -> dict:
    """What plan.fabric says about the two paths, per node: {"bootstrap": {...}, "data": {...}, "fabric": ...}.
    With gloo (a CPU build) the data goes where the bootstrap is, over sockets; "fabric" still names the
    subnet that joins every node with RDMA (what a hang's fix points at)."""
    if gloo:
        return {
            "bootstrap": _bootstrap(boot, order),
            "data": {"transport": "gloo", "subnet": boot.subnet, "nodes": {n: None for n in order}},
            "fabric": data.subnet if data is not None else None,
        }
    return {
        "bootstrap": _bootstrap(boot, order),
        "data": {
            "transport": "rdma" if any(hcas.values()) else "sockets",
            "subnet": data.subnet if data is not None else None,  # None: a ring's links, or sockets
            "nodes": {n: hcas.get(n) for n in order},
        },
        "fabric": data.subnet if data is not None else None,
    }


def _bootstrap(boot: Subnet, order: list[str]) -> dict:
    return {
        "subnet": boot.subnet,
        "management": boot.management,
        "nodes": {n: {"iface": a.iface, "ip": a.ip} for n, a in boot.nodes.items() if n in order},
    }


def describe_paths(paths: dict | None, node: str | None = None) -> str:
    """ "bootstrap enP7s7 (management), data RDMA rocep1s0f1,roceP2p1s0f1"; "" when nothing is known."""
    if not paths:
        return ""
    boot, data = paths.get("bootstrap") or {}, paths.get("data") or {}
    nodes = boot.get("nodes") or {}
    name = node if node in nodes else next(iter(nodes), None)
    iface = (nodes.get(name) or {}).get("iface") or boot.get("subnet", "?")
    words = f"bootstrap {iface}" + (" (management)" if boot.get("management") else "")
    hcas = (data.get("nodes") or {}).get(name) if name else None
    if data.get("transport") == "rdma" and hcas:
        return f"{words}, data RDMA {hcas}"
    if data.get("transport") == "gloo":
        return f"{words}, data over gloo there"
    return f"{words}, data over sockets"


def rendezvous_fix(paths: dict | None) -> str:
    """What to try first when the rendezvous hangs on a subnet that is neither the management port (NVIDIA's
    bootstrap) nor the fabric: the fabric joins every node by construction, a third network (a wlan, a
    docker bridge, a second LAN) may look joined and drop every packet. "" when nothing better is known."""
    if not paths:
        return ""
    boot, data = paths.get("bootstrap") or {}, paths.get("data") or {}
    subnet, fabric = boot.get("subnet"), paths.get("fabric", data.get("subnet"))
    if not subnet or not fabric or subnet == fabric or boot.get("management"):
        return ""
    ifaces = sorted({a["iface"] for a in (boot.get("nodes") or {}).values() if a and a.get("iface")})
    on = f" ({', '.join(ifaces)})" if ifaces else ""
    return (
        f"the rendezvous sits on {subnet}{on}, not on the fabric {fabric} that joins every node: relaunch with "
        f"--iface {fabric} (`sparktui preflight --iface {subnet}` shows whether the nodes reach each other there)"
    )
