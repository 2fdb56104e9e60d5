"""What every node needs before sparktui can serve a model, judged from the probe's facts (no extra
round trip): each need per node, met or not, and the fix in words and commands.

Statuses: ok; todo (missing here, and sparktui copies it: the model or an image on another node);
fail (the user has to act; the fix says how); unknown (the node could not say).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..config.config import Config
from .facts import NodeFacts
from .inventory import Inventory
from ..plan.plan import _image_id
from .probe_needs import DOCKER_DENIED, DOCKER_DOWN

TOOLKIT_FIX = (
    "install the NVIDIA Container Toolkit (package nvidia-container-toolkit from NVIDIA's apt repository), "
    "then `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`"
)


@dataclass
class Need:
    node: str
    id: str  # ssh | gpu | docker | gpu-runtime | rsync | model | image:ENGINE | fabric
    what: str  # the need in words
    status: str  # ok | todo | fail | unknown
    detail: str = ""  # what was found
    fix: str = ""  # what to do; empty when nothing is to be done

    def to_json(self) -> dict:
        return asdict(self)


def _user(f: NodeFacts, config: Config) -> str:
    return f.user or config.node(f.name).user or "the SSH user"


def _docker(f: NodeFacts, user: str) -> Need:
    what = f"docker usable by {user} without sudo"
    if f.docker.version:
        return Need(f.name, "docker", what, "ok", f"server {f.docker.version}")
    problem = f.docker.problem or next((n for n in f.notes if n.startswith("docker")), "docker did not answer")
    if DOCKER_DENIED in problem:
        fix = f"`sudo usermod -aG docker {user}`, then open a new SSH session (the group applies at login)"
    elif DOCKER_DOWN in problem:
        fix = "start the daemon: `sudo systemctl enable --now docker`"
    elif "not installed" in problem:
        fix = "install Docker: `sudo apt-get install -y docker.io` (or Docker CE)"
    else:
        fix = f"make `docker version` work for {user} on the node"
    return Need(f.name, "docker", what, "fail", problem, fix)


def _gpu_runtime(f: NodeFacts, style: str) -> Need | None:
    what = f"NVIDIA container toolkit ({style})"
    if style == "none":
        return None
    if not f.tools_probed:
        return Need(f.name, "gpu-runtime", what, "unknown", "the probe did not get that far")
    if style == "cdi":
        if f.cdi_specs:
            return Need(f.name, "gpu-runtime", what, "ok", ", ".join(f.cdi_specs))
        return Need(
            f.name,
            "gpu-runtime",
            what,
            "fail",
            "no CDI spec names nvidia.com/gpu in /etc/cdi or /var/run/cdi",
            "`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`",
        )
    nvidia_rt = "nvidia" in f.docker.runtimes
    if style == "runtime-nvidia":
        if nvidia_rt:
            return Need(f.name, "gpu-runtime", what, "ok", "docker lists the nvidia runtime")
        if not f.docker.version:
            return Need(f.name, "gpu-runtime", what, "unknown", "docker did not answer", "fix docker first")
        return Need(f.name, "gpu-runtime", what, "fail", "docker has no nvidia runtime", TOOLKIT_FIX)
    # gpus-all: dockerd runs the prestart hook it finds on its PATH
    hook = next((t for t in f.gpu_toolkit if t.endswith("/nvidia-container-runtime-hook")), None)
    if hook or nvidia_rt:
        return Need(f.name, "gpu-runtime", what, "ok", hook or "docker lists the nvidia runtime")
    return Need(f.name, "gpu-runtime", what, "fail", "nvidia-container-runtime-hook is not on the PATH", TOOLKIT_FIX)


def _model(f: NodeFacts, config: Config, source: str, facts: dict[str, NodeFacts]) -> Need:
    path = config.model.path
    what = "the model directory (model.path)"
    m = f.model
    if m is None:
        return Need(f.name, "model", what, "unknown", "not probed")
    if m.present:
        return Need(f.name, "model", what, "ok", f"{path}: {m.files if m.files is not None else '?'} files")
    state = f"incomplete ({m.incomplete})" if m.incomplete else "missing"
    if f.name == source:
        return Need(
            f.name,
            "model",
            what,
            "fail",
            f"{path} {state} on the source node",
            f"put the checkpoint at {path} on {source}, or set model.source to the node that has it",
        )
    src = facts.get(source)
    size = src.model.bytes if src and src.model and src.model.present else None
    if size and f.disk_free_bytes is not None and f.disk_free_bytes < size:
        return Need(
            f.name,
            "model",
            what,
            "fail",
            f"{state}, and {f.disk_free_bytes} bytes free < {size}",
            f"free space under {path} on {f.name}",
        )
    return Need(f.name, "model", what, "todo", f"{state}; {source} holds it", "`sparktui sync model` copies it")


def _image(f: NodeFacts, engine: str, image: str, facts: dict[str, NodeFacts], head: str) -> Need:
    what = f"the {engine} image {image}"
    if not f.docker.version:
        return Need(f.name, f"image:{engine}", what, "unknown", "docker did not answer", "fix docker first")
    if iid := _image_id(f.docker.images, image):
        return Need(f.name, f"image:{engine}", what, "ok", iid.removeprefix("sha256:")[:12])
    holders = [n for n, g in facts.items() if g.reachable and _image_id(g.docker.images, image)]
    if holders:
        return Need(
            f.name,
            f"image:{engine}",
            what,
            "todo",
            f"on {', '.join(holders)}",
            f"`sparktui sync image {engine}` copies it",
        )
    return Need(
        f.name,
        f"image:{engine}",
        what,
        "fail",
        "on no node",
        f"`docker pull {image}` on {head}, then `sparktui sync image {engine}`",
    )


def _fabric(f: NodeFacts, inv: Inventory) -> Need:
    what = "an address on the fabric shared by every node"
    live = [n for n, g in inv.facts.items() if g.reachable]  # an unreachable node cannot say; the others can
    best = next((s for s in inv.subnets if not s.management and s.joins(live)), None)
    if best and f.name in best.nodes:
        a = best.nodes[f.name]
        kind = f"RoCE {a.rdma}" if a.rdma else "TCP only (no RDMA device)"
        found = f"{a.iface} {a.ip} on {best.subnet}, {kind}"
        if not best.up:
            return Need(
                f.name,
                "fabric",
                what,
                "fail",
                found + "; a node's link on it is down",
                "bring the fabric port up on every node (`ip link`, the cable, the switch port)",
            )
        return Need(f.name, "fabric", what, "ok", found)
    return Need(
        f.name,
        "fabric",
        what,
        "fail",
        "no subnet apart from the management one joins every node",
        "give each node an address on one subnet of the fast link (e.g. 192.168.100.x/24 on the "
        "ConnectX-7 port), or name the interface under the node's `interfaces:` in the config",
    )


def tool_needs(f: NodeFacts, config: Config) -> list[Need]:
    """What one reachable node must have installed: GPU driver, docker for the SSH user, toolkit, rsync."""
    gpu = (
        Need(f.name, "gpu", "an NVIDIA GPU with its driver", "ok", f"{f.gpu.count}× {f.gpu.name}")
        if f.gpu.count
        else Need(
            f.name,
            "gpu",
            "an NVIDIA GPU with its driver",
            "fail",
            next((n for n in f.notes if n.startswith("nvidia-smi")), "nvidia-smi lists no GPU"),
            "install the NVIDIA driver; `nvidia-smi` must list the GPUs",
        )
    )
    rsync = (
        Need(f.name, "rsync", "rsync", "ok", f.rsync)
        if f.rsync
        else Need(f.name, "rsync", "rsync", "unknown", "the probe did not get that far")
        if not f.tools_probed
        else Need(f.name, "rsync", "rsync", "fail", "not installed", "`sudo apt-get install -y rsync`")
    )
    rt = _gpu_runtime(f, config.docker.gpu_style)
    return [gpu, _docker(f, _user(f, config))] + ([rt] if rt else []) + [rsync]


def node_needs(config: Config, inv: Inventory) -> list[Need]:
    """Every need of every node, in config order."""
    source = config.model.source or config.head.name
    images = config.used_images()
    out: list[Need] = []
    for f in inv.facts.values():
        if not f.reachable:
            out.append(
                Need(
                    f.name,
                    "ssh",
                    "reachable over SSH",
                    "fail",
                    f.error or "unreachable",
                    "check host, user, port and key in the config; `ssh` to it must work without a password",
                )
            )
            continue
        out += tool_needs(f, config)
        out.append(_model(f, config, source, inv.facts))
        out += [_image(f, e, i, inv.facts, config.head.name) for e, i in images.items()]
        out.append(_fabric(f, inv))
    return out


def unmet(needs: list[Need]) -> list[Need]:
    return [n for n in needs if n.status == "fail"]
