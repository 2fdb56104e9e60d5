"""A launch plan: engine, image, model, TP/PP, rendezvous, ports -> checked, per-node commands in order.

make_plan is pure: it reads the config, the probed facts and the subnets, never a node. User
mistakes become plain sentences in plan.errors / plan.warnings, never exceptions, so a screen or
`sparktui plan` can show every problem at once next to the commands it would run.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field, replace
from ipaddress import IPv4Network
from typing import Union

from ..config.config import Config
from ..engines import DEFAULT_ENGINE, ENGINES, get_engine, host_ip_vars, runs_ray, uses_dist_port
from ..engines import cpubuild
from ..engines.base import ALLOC_CONF
from ..engines.common import Context, Joined, Secret, Spot, Step, env_value, protect_args, render, safe_name
from ..nodes.facts import NodeFacts, Subnet
from . import modelconfig, files as plan_files
from ..network.fabric import (
    gid_index,
    idle_halves,
    idle_warning,
    in_use,
    mtu_checks,
    rails,
    summary,
    topology,
    topology_env,
)
from .image import default_mode, engine_release, info_for
from .collectives import judge as judge_collectives
from .support import plan_checks, support_of_info
from .fit import Fit, NodeRoom, after_load, default_fraction, fit_from_facts
from ..memory.free import shortfalls
from ..config.secrets import MASK, mask
from ..config.yamlpos import unknown_names
from .sizing import sizing_words
from ..network.ring import boot_note, layout, ring_of, ring_used
from ..network.paths import data_subnet, gloo_note, paths_of, split_note
from ..network.network import TCP_VS_ROCE, describe, fabric_fix, fabric_nets, fabric_problems, resolve

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by sparktui per node; overriding one from config or --env applies the same value on every node.
_PER_NODE = (
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "UCX_NET_DEVICES",
    "OMPI_MCA_btl_tcp_if_include",
    "NCCL_IB_HCA",
    "NCCL_IB_GID_INDEX",
    *host_ip_vars(),
)
# PyTorch's allocator settings a user may give; since torch 2.9 PYTORCH_ALLOC_CONF is read before the CUDA one
_USER_ALLOC = (ALLOC_CONF, "PYTORCH_ALLOC_CONF")


@dataclass
class PlanOptions:
    """What the user chose; None means the config's default (or the engine's)."""

    engine: str = DEFAULT_ENGINE  # a name in the engine registry (core/engines)
    mode: str | None = None  # one of the engine's modes; None: its first (or what its image allows)
    image: str | None = None  # default: config.image_for(engine)
    model_path: str | None = None  # default: config.model.path
    served_model_name: str | None = None  # default: config.model.name
    tp: int | None = None  # default: GPUs per node x nodes
    pp: int | None = None  # default: 1
    nodes: list[str] | None = None  # order = ranks, rank 0 = head; default: config head, then the others
    rendezvous: str | None = None  # subnet CIDR, interface name or IP; default: the best subnet joining all
    dist_port: int | None = None  # --dist-init-addr / --master-port
    port: int | None = None  # HTTP port on the head
    ray_port: int | None = None  # Ray GCS port (vllm ray)
    mem_fraction: float | None = None  # --mem-fraction-static / --gpu-memory-utilization
    max_model_len: int | None = None  # --context-length / --max-model-len
    max_model_len_auto: bool = False  # let the engine fit the longest context (vLLM's --max-model-len auto)
    kv_cache_bytes: int | None = None  # the KV cache's size in bytes (vLLM's --kv-cache-memory-bytes)
    trust_remote_code: bool | None = None  # None: when the model's config.json has auto_map
    extra_args: list[str] = field(default_factory=list)  # appended to the engine command
    env: dict[str, str] = field(default_factory=dict)  # extra container env (wins over computed values)
    deployment: str | None = None  # default: config.cluster
    model_config: dict | None = None  # the model's config.json, when it could be read
    model_config_problem: str | None = None  # why it could not be used (a plan warning), when it could not
    engine_version: str | None = None  # the engine release inside the image, when known (flags follow it)
    files: dict[str, str] = field(default_factory=dict)  # container path -> base64 content (a recipe's mods)
    node_limit: int | None = None  # without `nodes`: use at most this many, head first (a recipe's max_nodes)
    support: object = None  # core.support.Support: whether the image loads the model, as the head's image answered


@dataclass
class NodePlan:
    """One node's part, as shown (secrets masked)."""

    name: str
    rank: int
    role: str
    iface: str | None
    ip: str | None
    rdma: str | None
    container: str
    env: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "rank": self.rank,
            "role": self.role,
            "iface": self.iface,
            "ip": self.ip,
            "rdma": self.rdma,
            "env": dict(self.env),
            "commands": list(self.commands),
        }


@dataclass
class Plan:
    engine: str
    mode: str
    image: str
    model_path: str
    served_model_name: str | None
    tp: int
    pp: int
    deployment: str
    plan_id: str = ""
    subnet: str | None = None
    head_ip: str | None = None
    dist_port: int = 0
    port: int = 0
    ray_port: int = 0
    nodes: list[NodePlan] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)  # global order
    fit: Fit | None = None
    engine_version: str | None = None  # the release the commands are written for (None: unknown, the newest)
    engine_note: str = ""  # where that release came from, in words: "vLLM 0.11.0 in the image on spark1"
    mem_fraction: float | None = None  # of each GPU's total memory, as the engine flag says
    unified: list[str] = field(default_factory=list)  # nodes whose GPU takes system memory (the free-memory check)
    fabric: dict = field(default_factory=dict)  # topology, line rate, halves and MTU in use (fabric.summary)
    collectives: dict | None = None  # the image's family and what carries TP all-reduces (collectives.py)
    collectives_line: str | None = None  # the same in one line, when not NCCL alone
    support: dict | None = None  # the image's answer on loading the model (core/plan/support.py), when asked
    after_load: list[NodeRoom] = field(default_factory=list)  # per node sharing system memory: what stays after load
    notes: list[str] = field(default_factory=list)  # what the plan chose on its own and why (the preview shows them)
    expandable: bool = False  # PyTorch's expandable segments are on in the containers (set by the plan or the user)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def rendezvous_port(self) -> int:
        return self.ray_port if runs_ray(self.engine, self.mode) else self.dist_port

    def steps_for(self, node: str) -> list[Step]:
        return [s for s in self.steps if s.node == node]

    def to_json(self) -> dict:
        return {
            "engine": self.engine,
            "mode": self.mode,
            "tp": self.tp,
            "pp": self.pp,
            "engine_version": self.engine_version,
            "engine_note": self.engine_note,
            "rendezvous": {"subnet": self.subnet, "head_ip": self.head_ip, "port": self.rendezvous_port},
            "nodes": [n.to_json() for n in self.nodes],
            "fit": self.fit.to_json() if self.fit else {},
            "fabric": dict(self.fabric),
            "collectives": self.collectives,
            "support": self.support,
            "after_load": [r.to_json() for r in self.after_load],
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            "errors": list(self.errors),
            "runnable": self.ok,  # false: the nodes' commands are for reading until the errors are fixed
        }


def model_dims(cfg: dict | None) -> tuple[int | None, int | None]:
    """(attention heads, KV heads) from a config.json; multimodal models nest them in text_config."""
    if not isinstance(cfg, dict):
        return None, None
    for c in (cfg, cfg.get("text_config"), cfg.get("llm_config"), cfg.get("language_config")):
        if isinstance(c, dict) and isinstance(c.get("num_attention_heads"), int):
            kv = c.get("num_key_value_heads")
            return c["num_attention_heads"], kv if isinstance(kv, int) else None
    return None, None


def _norm_image(ref: str) -> str:
    """docker.io/library/x, docker.io/x and x name one image; no tag means :latest."""
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/", "index.docker.io/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    if "@" not in ref and ":" not in ref.rsplit("/", 1)[-1]:
        ref += ":latest"
    return ref


def _image_id(images: dict[str, str], ref: str) -> str | None:
    want = _norm_image(ref)
    for k, v in images.items():
        if _norm_image(k) == want:
            return v
    return None


def _same_id(a: str, b: str) -> bool:
    a, b = a.removeprefix("sha256:"), b.removeprefix("sha256:")
    n = min(len(a), len(b))
    return n > 0 and a[:n] == b[:n]  # `docker images` shows 12 characters, inspect all 64


def _default_order(config: Config) -> list[str]:
    head = next((n.name for n in config.nodes if n.role == "head"), config.nodes[0].name if config.nodes else None)
    return ([head] if head else []) + [n.name for n in config.nodes if n.name != head]


def _valid_port(p: int) -> bool:
    return isinstance(p, int) and 0 < p < 65536


class _Checks:
    """Collects errors and warnings while a plan is built."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, msg: str) -> None:
        msg = mask(msg)  # messages quote user values; a secret among them is hidden here once
        if msg not in self.errors:
            self.errors.append(msg)

    def warn(self, msg: str) -> None:
        msg = mask(msg)
        if msg not in self.warnings:
            self.warnings.append(msg)


def _check_nodes(config: Config, order: list[str], facts: dict[str, NodeFacts], c: _Checks) -> list[int]:
    """GPU count per node (0 when unknown), after checking names and reachability."""
    known = {n.name for n in config.nodes}
    if not order:
        c.error("no nodes to plan for")
    for name in order:
        if name not in known:
            c.error(unknown_names("node", [name], sorted(known)))
    dupes = sorted({n for n in order if order.count(n) > 1})
    if dupes:
        c.error(f"node(s) listed twice: {', '.join(dupes)}")
    counts = []
    for name in order:
        f = facts.get(name)
        if f is None:
            c.error(f"{name}: not probed (no facts)")
            counts.append(0)
        elif not f.reachable:
            c.error(f"{name}: unreachable ({f.error or 'no answer'})")
            counts.append(0)
        elif f.gpu.count < 1:
            c.error(f"{name}: no GPU found")
            counts.append(0)
        else:
            counts.append(f.gpu.count)
    seen = {x for x in counts if x}
    if len(seen) > 1:
        per = ", ".join(f"{n} {k}" for n, k in zip(order, counts))
        c.error(f"nodes have different GPU counts ({per}): the engines expect the same on every node")
    return counts


def _check_parallel(tp: int, pp: int, gpus: int, cfg: dict | None, c: _Checks) -> None:
    if tp < 1 or pp < 1:
        c.error(f"TP and PP must be at least 1 (got TP {tp}, PP {pp})")
        return
    if gpus and tp * pp != gpus:
        c.error(f"TP x PP must equal the GPUs in use: {tp} x {pp} = {tp * pp}, but the nodes have {gpus}")
    heads, kv = model_dims(cfg)
    if heads is not None and heads % tp:
        good = [d for d in range(1, heads + 1) if heads % d == 0 and d <= max(gpus, tp)]
        c.error(
            f"TP {tp} does not divide the model's {heads} attention heads (TP could be {', '.join(map(str, good))})"
        )
    if kv and tp and kv % tp and tp % kv:
        c.error(
            f"TP {tp} and the model's {kv} KV heads do not divide one another (the engines need one to divide the other)"
        )


def _check_ports(engine: str, mode: str, ports: dict[str, int], c: _Checks) -> None:
    ray = runs_ray(engine, mode)
    dist = uses_dist_port(engine, mode)
    used = {k: v for k, v in ports.items() if not (k == "ray port" and not ray) and not (k == "dist port" and not dist)}
    for what, p in used.items():
        if not _valid_port(p):
            c.error(f"{what} {p} is not a valid TCP port (1-65535)")
    by_port: dict[int, list[str]] = {}
    for what, p in used.items():
        by_port.setdefault(p, []).append(what)
    for p, whats in by_port.items():
        if len(whats) > 1:
            c.error(f"{' and '.join(whats)} are both {p}: they must differ")


def _fabric_error(
    facts: dict[str, NodeFacts],
    overrides: dict[str, dict[str, str]],
    net,
    why: str,
    order: list[str],
    others: list[Subnet],
) -> str | None:
    """Why the fabric `net` cannot carry the rendezvous, naming node, interface and state; None if it can."""
    problems = fabric_problems(facts, net, order, overrides)
    if not problems:
        return None
    where = "; ".join(f"{n} {i}: {st}" for n, i, st in problems)
    alt = [s for s in others if s.up and s.joins(order)]
    choose = (
        f"--iface {alt[0].subnet}" + (f" (management: {TCP_VS_ROCE})" if alt[0].management else "")
        if alt
        else "--iface SUBNET"
    )
    return (
        f"the fabric {net} ({why}) cannot carry the rendezvous: {where}. Fix: {fabric_fix(problems, net)}; "
        f"or choose another network on purpose with {choose}"
    )


def _pick_subnet(
    subnets: list[Subnet],
    spec: str | None,
    order: list[str],
    c: _Checks,
    facts: dict[str, NodeFacts] | None = None,
    overrides: dict[str, dict[str, str]] | None = None,
    last_subnet: str | None = None,
) -> Subnet | None:
    facts = facts or {}
    ring = ring_of(facts, order)
    if spec:
        try:
            s = resolve(subnets, spec, order)
        except ValueError as e:
            c.error(f"rendezvous {spec}: {e}")
            return None
        if not s.up:
            err = _fabric_error(
                facts, overrides or {}, IPv4Network(s.subnet), "chosen", order, [x for x in subnets if x is not s]
            )
            c.error(err or f"the rendezvous subnet {describe(s)} has an interface down")
            return None
    else:
        # Never off the fabric on our own: when the network meant for the nodes is down somewhere, say
        # where and how, and leave any other network to an explicit choice.
        fabric = fabric_nets([f for f in facts.values()], overrides, last_subnet)
        joining = [s for s in subnets if s.joins(order)]  # network.subnets lists the best first
        if fabric:
            usable = [s for s in joining if IPv4Network(s.subnet) in fabric and s.up]
            boot = next((s for s in joining if s.up and s.management), None) or next((s for s in joining if s.up), None)
            if not usable and ring is not None and boot is not None:
                # No subnet joins a ring's nodes: bootstrap where they all meet, data over the ring's HCAs.
                c.warn(boot_note(ring, boot.subnet))
                return boot
            if not usable:
                for net, why in fabric.items():
                    err = _fabric_error(facts, overrides or {}, net, why, order, joining)
                    if err:
                        c.error(err)
                        return None
                c.error(
                    "no subnet joins all nodes on the fabric: " + "; ".join(f"{n} ({w})" for n, w in fabric.items())
                )
                return None
            s = usable[0]
        else:
            if not joining:
                c.error(
                    "no subnet joins all nodes: give every node an address on one shared subnet (the fabric), "
                    "or name one with --iface"
                )
                return None
            s = joining[0]
            if s.management:
                c.error(
                    f"only the management subnet {s.subnet} joins all nodes and no fabric is known: NCCL would "
                    f"run over TCP on it ({TCP_VS_ROCE}). Address the fabric link on every node, or choose it "
                    f"on purpose with --iface {s.subnet}"
                )
                return None
    if not s.up:
        c.error(f"the rendezvous subnet {describe(s)} has an interface down")
    data = data_subnet(s, subnets, order)
    if s.management and ring is None and data is None:
        c.warn(
            f"{s.subnet} is the management subnet: NCCL would run over TCP on it ({TCP_VS_ROCE}); "
            f"pick the fabric link with --iface if there is one"
        )
    elif not s.rdma and data is None:
        plain = [n for n in order if n in s.nodes and not s.nodes[n].rdma]
        c.warn(
            f"{s.subnet} has no RDMA device on {', '.join(plain)}: NCCL falls back to TCP sockets (slower, still works)"
        )
    for note in s.notes:
        c.warn(f"{s.subnet}: {note}")
    return s


def _check_model(path: str, order: list[str], facts: dict[str, NodeFacts], c: _Checks) -> None:
    if not path.startswith("/"):
        c.error(f"model path {path!r} must be absolute (it is mounted at the same path in the containers)")
    if ":" in path or "," in path:
        c.error(f"model path {path!r} contains ':' or ',', which docker -v cannot mount")
    for name in order:
        f = facts.get(name)
        if f is None or not f.reachable:
            continue
        if f.model is None:
            c.warn(f"{name}: model directory not checked")
        elif f.model.path.rstrip("/") != path.rstrip("/"):
            c.warn(f"{name}: probed {f.model.path}, not {path}: presence not checked")
        elif f.model.incomplete:
            c.error(
                f"{name}: model incomplete at {path}: {f.model.incomplete} "
                f"(`sparktui sync model` completes and verifies the copy)"
            )
        elif not f.model.present:
            c.error(f"{name}: model directory {path} is missing (copy the checkpoint there first)")


def missing_image(image: str, node: str, has_it: bool) -> str:
    """One line: the node lacks the image, and the way to put it there (a copy from a node that has it,
    else a pull or load on the node itself)."""
    q = shlex.quote(image)
    if has_it:
        return f"{node}: image {image} is not there: copy it with `sparktui sync image {q} --to {node}` (or `docker load` it there)"
    return f"{node}: image {image} is not there: `docker pull {q}` or `docker load` it on {node}"


def _check_image(image: str, order: list[str], facts: dict[str, NodeFacts], c: _Checks) -> None:
    live = [n for n in order if n in facts and facts[n].reachable]
    if live and not any(facts[n].docker.images for n in live):
        c.warn(f"image {image} not checked: no node listed its images")
        return
    ids = {n: iid for n in live if (iid := _image_id(facts[n].docker.images, image)) is not None}
    for n in live:
        if n not in ids:
            c.error(missing_image(image, n, has_it=bool(ids)))
    names = list(ids)
    if any(not _same_id(ids[names[0]], ids[n]) for n in names[1:]):
        per = ", ".join(f"{n} {ids[n].removeprefix('sha256:')[:12]}" for n in names)
        c.error(f"image {image} differs between nodes ({per}): copy one image to all")


def _checkpoint_bytes(config: Config, order: list[str], facts: dict[str, NodeFacts]) -> int | None:
    source = config.model.source or (order[0] if order else None)
    for name in [source] + order:
        f = facts.get(name) if name else None
        if f is not None and f.model is not None and f.model.bytes:
            return f.model.bytes
    return None


def fabric_hcas(f: NodeFacts | None, addr, subnets: list[Subnet], order: list[str]) -> str | None:
    """Every active RDMA device of this node on the fabric, the rendezvous interface's first.

    A Spark's ConnectX-7 shows one RDMA device per port (rocep1s0f1, roceP2p1s0f1), each on its own
    subnet; NCCL uses all devices listed in NCCL_IB_HCA, so naming one would leave a port idle.
    """
    out = [addr.rdma] if addr.rdma else []
    if f is None or not addr.rdma:
        return addr.rdma
    for s in subnets:
        if s.management or not s.rdma or not s.up or not all(n in s.nodes for n in order):
            continue
        mine = s.nodes.get(f.name)
        if mine and mine.rdma and mine.rdma not in out:
            iface = next((i for i in f.interfaces if i.name == mine.iface), None)
            if iface is None or iface.up:
                out.append(mine.rdma)
    return ",".join(out)


def _fabric_checks(
    facts: dict[str, NodeFacts],
    subnet: Subnet,
    subnets: list[Subnet],
    order: list[str],
    spots: list[Spot],
    c: _Checks,
    nccl_scope: str = "",
) -> dict:
    """Both halves of the port, the MTU, the topology's NCCL settings and each node's GID index; returns
    what the preflight measures against (fabric.summary). nccl_scope: what NCCL still carries when another
    collective takes decode's all-reduces (collectives.py)."""
    idle = idle_halves(facts, subnet, subnets, order)
    if idle and subnet.rdma:
        c.warn(idle_warning(idle, subnet) + (f" ({nccl_scope})" if nccl_scope else ""))
    ring = ring_of(facts, order)
    used = ring_used(facts, ring) if ring is not None and not subnet.rdma else in_use(facts, subnet, subnets, order)
    errors, warns = mtu_checks(facts, subnet, subnets, order, used)
    for e in errors:
        c.error(e)
    for w in warns:
        c.warn(w)
    topo = topology(facts, order)
    extra = topology_env(topo)
    for spot in spots:
        if not spot.rdma:
            continue
        spot.ib_env = dict(extra)
        gid = gid_index(used.get(spot.name, []))
        if gid is not None:
            spot.ib_env["NCCL_IB_GID_INDEX"] = str(gid)
    out = summary(facts, subnet, used, topo, bool(idle))
    out["layout"] = layout(facts, order, topo)
    out["rails"] = rails(facts, used, order)
    if ring is not None:
        out["ring"] = ring.to_json()
        out["rdma"] = out["rdma"] or bool(ring.links)
    return out


def _plan_id(content: dict) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _shown_env(env: dict[str, Union[str, Secret]]) -> dict[str, str]:
    return {k: (MASK if isinstance(v, Secret) else v) for k, v in env.items()}


def _alloc_conf(config: Config, opts: PlanOptions, engine_mod) -> tuple[str | None, bool, str]:
    """(PYTORCH_CUDA_ALLOC_CONF the plan sets, whether expandable segments will be on, the preview's line).
    A user's own setting, in --env or the config's docker.env, is theirs: kept as given, never added to."""
    if engine_mod is None:
        return None, False, ""
    value, why = engine_mod.alloc_conf(opts.extra_args)
    for source, env in (("--env", opts.env), ("config docker.env", config.docker.env)):  # --env wins, as below
        for name in _USER_ALLOC:
            if name in env:
                theirs = str(env[name])
                on = "expandable_segments:true" in theirs.replace(" ", "").lower()
                would = f"; sparktui would set {ALLOC_CONF}={value}" if value else ""
                return None, on, f"{name}={theirs} from {source} is yours and wins{would}"
    if value is None:
        return None, False, f"{ALLOC_CONF}: {why}"
    return value, True, f"{ALLOC_CONF}={value}: {why}"


def _spot_env(
    config: Config, opts: PlanOptions, engine_mod, ctx: Context, spot: Spot, c: _Checks, alloc: str | None = None
) -> dict:
    env: dict[str, Union[str, Secret]] = {}
    env.update(engine_mod.interface_env(spot))
    env.update(engine_mod.node_env(ctx, spot))
    if alloc:
        env[ALLOC_CONF] = alloc  # before the user's env, which never has it (_alloc_conf)
    env["NCCL_DEBUG"] = "INFO"  # one line at init tells the transport (RoCE or sockets); diagnosis reads it
    if config.docker.gpu_style == "runtime-nvidia":
        env["NVIDIA_VISIBLE_DEVICES"] = "all"  # the nvidia runtime exposes no GPU without it
    for source, extra in (("config docker.env", config.docker.env), ("--env", opts.env)):
        for k, v in extra.items():
            if k in _PER_NODE and k in env and env[k] != v:
                c.warn(f"{source} sets {k}={v} on every node, replacing {spot.name}'s own {env[k]}")
            env[k] = env_value(k, str(v))
            if isinstance(env[k], Secret) and ("\n" in str(v) or "\r" in str(v)):
                c.error(f"{k}'s value has a line break: the env file that carries secrets to docker cannot hold it")
    return env


def _usable_config(opts: PlanOptions, c: _Checks) -> dict | None:
    """The model's config.json when its fields are in range; else None and a warning naming the field."""
    why = opts.model_config_problem
    if why is None and opts.model_config is not None:
        why = modelconfig.problem(opts.model_config)
    if why is None:
        return opts.model_config
    c.warn(f"{why}; planned without it (TP not checked against its heads, fit with an allowance)")
    return None


def _secrets_off_argv(engine_mod, extra: list, c: _Checks) -> tuple[list, dict[str, Secret]]:
    """Secret-valued engine flags never stay on the engine's command line: `ps` on the node shows every
    argv to every user for the deployment's life. The API key goes to the variable the engine reads it
    from (vLLM's VLLM_API_KEY), through the container's env file; any other secret flag is refused."""
    var = getattr(engine_mod, "api_key_env", None)
    key_flag = engine_mod.flag("api_key") if engine_mod is not None else None
    out: list = []
    env: dict[str, Secret] = {}
    for i, w in enumerate(extra):
        if isinstance(w, Secret):
            continue  # taken with its flag below
        nxt = extra[i + 1] if i + 1 < len(extra) else None
        flag, secret = (w, nxt) if isinstance(w, str) and isinstance(nxt, Secret) else (None, None)
        if isinstance(w, Joined) and any(isinstance(p, Secret) for p in w.parts):
            flag, secret = str(w.parts[0]).rstrip("="), next(p for p in w.parts if isinstance(p, Secret))
        if secret is None:
            out.append(w)
        elif var and flag == key_flag:
            env[var] = Secret(var, secret.value)
        else:
            c.error(_argv_secret_refusal(engine_mod, flag, flag == key_flag))
            out += [w] if isinstance(w, Joined) else [w, secret]
    return out, env


def _argv_secret_refusal(engine_mod, flag: str, is_key: bool) -> str:
    name = getattr(engine_mod, "label", "the engine")
    why = f"{name} reads its API key only from {flag}" if is_key else f"the secret flag {flag}, given to the engine"
    way = (
        "serve with vLLM (it reads VLLM_API_KEY) or put an authenticating proxy in front"
        if is_key
        else "pass it as --env NAME=VALUE where the engine reads it from its environment (HF_TOKEN)"
    )
    return f"{why}, and `ps` on the node shows an engine's command line to every user while it serves: {way}"


def make_plan(
    config: Config,
    facts: dict[str, NodeFacts],
    subnets: list[Subnet],
    opts: PlanOptions,
    *,
    last_subnet: str | None = None,
) -> Plan:
    """Check the options against the cluster and write every node's commands.

    last_subnet: the subnet this deployment's last launch used; like an RDMA subnet or one named in
    nodes[].interfaces, it is the fabric, and the plan never leaves the fabric unless told to.
    """
    c = _Checks()
    model_cfg = _usable_config(opts, c)
    engine = opts.engine
    engine_mod = ENGINES.get(engine)
    if engine_mod is None:
        c.error(f"unknown engine {engine!r} (expected one of: {', '.join(ENGINES)})")
        mode = opts.mode or ""
    order = list(opts.nodes) if opts.nodes else _narrow(_default_order(config), facts, opts, c)
    image = opts.image or (config.image_for(engine) if engine_mod else None) or ""
    info = info_for(facts, order[0] if order else None, image) if image else None
    mode_note = ""
    if engine_mod is not None:
        mode, mode_note = (
            (opts.mode, "") if opts.mode else default_mode(engine, engine_mod.modes, info, opts.engine_version)
        )
        if mode not in engine_mod.modes:
            c.error(f"{engine} has no mode {mode!r} (expected: {', '.join(engine_mod.modes)})")
    counts = _check_nodes(config, order, facts, c)
    per_node = max(counts) if counts else 0
    gpus = per_node * len(order)
    tp = opts.tp if opts.tp is not None else max(gpus, 1)
    pp = opts.pp if opts.pp is not None else 1
    _check_parallel(tp, pp, gpus, model_cfg, c)

    eng = config.engine
    default_port = config.port_for(engine)
    port = opts.port if opts.port is not None else default_port
    dist_port = opts.dist_port if opts.dist_port is not None else eng.dist_port
    ray_port = opts.ray_port if opts.ray_port is not None else eng.ray_port
    _check_ports(engine, mode, {"HTTP port": port, "dist port": dist_port, "ray port": ray_port}, c)

    overrides = {n.name: dict(n.interfaces) for n in config.nodes if n.interfaces}
    subnet = _pick_subnet(subnets, opts.rendezvous, order, c, facts, overrides, last_subnet) if order else None
    model_path = opts.model_path or config.model.path
    _check_model(model_path, order, facts, c)
    if not image:
        c.error("no image given for the engine")
    else:
        _check_image(image, order, facts, c)
    release = engine_release(engine, mode, image, info, opts.engine_version)
    version, version_note = release.version, release.note + (f"; {mode_note}" if mode_note else "")
    for e in release.errors:
        c.error(e)
    for w in release.warnings:
        c.warn(w)
    sizing, sizing_errors = sizing_words(
        engine_mod, version, opts.kv_cache_bytes, opts.max_model_len_auto, opts.max_model_len
    )
    for e in sizing_errors:
        c.error(e)
    if sizing:  # as engine arguments: the fit and the memory advice read the KV size from them
        opts = replace(opts, extra_args=[*opts.extra_args, *sizing])
    support = opts.support if opts.support is not None else support_of_info(info)  # the form's: kept in the facts
    support_errors, support_warnings = plan_checks(support, engine, image)
    for e in support_errors:  # first: whatever else the plan says, this image cannot load this model
        c.error(e)
        c.errors.insert(0, c.errors.pop())
    for w in support_warnings:
        c.warn(w)

    mem_fraction = opts.mem_fraction if opts.mem_fraction is not None else default_fraction(engine, eng.mem_fraction)
    if not 0 < mem_fraction <= 1:
        c.error(f"memory fraction {mem_fraction} must be above 0 and at most 1")
    max_len = opts.max_model_len if opts.max_model_len is not None else eng.max_model_len
    if opts.max_model_len_auto:  # the engine picks it: the config's default length does not apply
        max_len = None
    if max_len is not None and max_len < 1:
        c.error(f"max model length {max_len} must be positive")
    for e in plan_files.check_files(opts.files):
        c.error(e)
    for k in list(config.docker.env) + list(opts.env):
        if not _ENV_NAME.match(k):
            c.error(f"environment variable name {k!r} is not valid")

    cpu = cpubuild.is_cpu_build(version)
    # PyTorch's CUDA allocator has nothing to say on a CPU build
    alloc, expandable, alloc_note = _alloc_conf(config, opts, engine_mod) if not cpu else (None, False, "")
    cpu_env = cpubuild.kv_env(list(opts.extra_args), getattr(engine_mod, "kv_bytes_flag", None)) if cpu else {}
    if cpu:  # its KV cache is host memory, allocated whole at start-up: it must fit what each node has free
        kv_flag = getattr(engine_mod, "kv_bytes_flag", None)
        asked = cpubuild.kv_asked(list(opts.extra_args), {**cpu_env, **config.docker.env, **opts.env}, kv_flag)
        for name in order:
            f = facts.get(name)
            misfit = cpubuild.kv_misfit(asked, name, f.memory.available_bytes if f is not None else None)
            if misfit:
                c.error(misfit)
    rooms: list[NodeRoom] = []
    fit = None
    # a CPU build's memory is the host's, not a GPU's: the GPU fit and its fraction don't apply
    if order and tp >= 1 and pp >= 1 and 0 < mem_fraction <= 1 and not cpu:
        fit = fit_from_facts(
            facts,
            order,
            _checkpoint_bytes(config, order, facts),
            tp,
            pp,
            mem_fraction,
            engine=engine,
            model_config=model_cfg,
            extra_args=opts.extra_args,
        )
        for e in fit.errors:
            c.error(f"fit: {e}")
        for w in fit.warnings:
            c.warn(f"fit: {w}")
        for short in shortfalls(facts, order, mem_fraction):
            c.warn(f"free memory: {short.message()}")
        rooms = after_load(
            facts,
            order,
            engine=engine,
            fraction=mem_fraction,
            floor=config.memory.floor,
            weights_per_gpu=fit.weights_per_gpu,
            expandable=expandable,
            extra_args=opts.extra_args,
        )
        for room in rooms:
            if room.short:
                c.warn(f"after load: {room.message()}")

    trust = opts.trust_remote_code
    if trust is None:
        trust = isinstance(model_cfg, dict) and "auto_map" in model_cfg
    deployment = safe_name(opts.deployment or config.cluster)
    served = opts.served_model_name or config.model.name or None
    head_ip = subnet.nodes[order[0]].ip if subnet and order and order[0] in subnet.nodes else None

    plan = Plan(
        engine=engine,
        mode=mode,
        image=image,
        model_path=model_path,
        served_model_name=served,
        tp=tp,
        pp=pp,
        deployment=deployment,
        subnet=subnet.subnet if subnet else None,
        head_ip=head_ip,
        dist_port=dist_port,
        port=port,
        ray_port=ray_port,
        fit=fit,
        engine_version=version,
        engine_note=version_note,
        mem_fraction=mem_fraction,
        unified=[] if cpu else [n for n in order if n in facts and facts[n].gpu.unified],
        after_load=rooms,
        notes=[alloc_note] if alloc_note else [],
        expandable=expandable,
    )
    if cpu:
        plan.notes.append(cpubuild.note(version or "", cpu_env, getattr(engine_mod, "kv_bytes_flag", None)))
    if getattr(support, "engine", None) == engine and getattr(support, "image", None) == image:
        plan.support = support.to_json()
    spots = []
    ring = ring_of(facts, order)
    # The bootstrap (rendezvous) subnet need not carry the data: NCCL moves it over the HCAs it is given.
    data = data_subnet(subnet, subnets, order) if subnet is not None and ring is None else None
    if subnet is not None and data is not None and data is not subnet:
        plan.notes.append(gloo_note(subnet, data) if cpu else split_note(subnet, data))
    for rank, name in enumerate(order):
        addr = subnet.nodes.get(name) if subnet else None
        f = facts.get(name)
        ib = bool(f and f.infiniband)
        if addr and addr.rdma and f is not None and not ib:
            c.warn(
                f"{name}: {addr.iface} has RDMA device {addr.rdma} but no /dev/infiniband: NCCL will use TCP sockets"
            )
        data_addr = data.nodes.get(name) if data is not None else addr
        rdma = fabric_hcas(f, data_addr, subnets, order) if data_addr else None
        if ring is not None and addr is not None and not addr.rdma:
            rdma = ",".join(ring.hcas(name)) or None  # the rendezvous carries no data on a ring: every link does
        spots.append(
            Spot(
                name=name,
                rank=rank,
                role="head" if rank == 0 else "worker",
                iface=addr.iface if addr else None,
                ip=addr.ip if addr else None,
                rdma=rdma,
                infiniband=ib,
            )
        )
    coll = judge_collectives(engine_mod, image, {**config.docker.env, **opts.env}, len(order))
    for w in coll.warnings:
        c.warn(w)
    plan.notes += coll.notes
    plan.collectives, plan.collectives_line = coll.to_json(), coll.line()
    if subnet is not None:
        plan.fabric = _fabric_checks(facts, data or subnet, subnets, order, spots, c, coll.nccl_scope())
        hcas = {s.name: s.rdma if s.infiniband else None for s in spots}
        plan.fabric["paths"] = paths_of(subnet, data, order, hcas, gloo=cpu)
        if coll.active:  # the preflight's bandwidth verdict reads it (preflight/rate.py)
            plan.fabric["nccl_scope"] = coll.nccl_scope()
    # Secret env values by name: a secret flag whose variable name they use gets its own name in exports.
    taken = {k: v for k, v in {**config.docker.env, **opts.env}.items() if env_value(k, str(v)) != str(v)}
    extra = protect_args(list(opts.extra_args), {k: str(v) for k, v in taken.items()})
    extra, key_env = _secrets_off_argv(engine_mod, extra, c)
    ctx = Context(
        engine=engine,
        mode=mode,
        image=image,
        model_path=model_path,
        served_name=served,
        tp=tp,
        pp=pp,
        head_ip=head_ip or "",
        dist_port=dist_port,
        port=port,
        ray_port=ray_port,
        mem_fraction=None if cpu else mem_fraction,
        max_model_len=max_len,
        trust_remote_code=bool(trust),
        extra_args=extra,
        deployment=deployment,
        plan_id="",
        docker=replace(config.docker, gpu_style="none") if cpu else config.docker,
        nodes=spots,
        engine_version=version,
        files=plan_files.mounts(opts.files),
    )
    if engine_mod is not None:
        for spot in spots:
            spot.env = {**cpu_env, **_spot_env(config, opts, engine_mod, ctx, spot, c, alloc), **key_env}
        for why in engine_mod.plan_refusals(ctx):
            c.error(why)
        for why in engine_mod.plan_warnings(ctx):
            c.warn(why)
    ctx.plan_id = plan.plan_id = _plan_id(
        {
            "engine": engine,
            "mode": mode,
            "image": image,
            "model": model_path,
            "served": served,
            "tp": tp,
            "pp": pp,
            "ports": [port, dist_port, ray_port],
            "mem": mem_fraction,
            "max_len": max_len,
            "trust": trust,
            "extra": render(extra, "show"),
            "docker": [
                ctx.docker.gpu_style,
                config.docker.ulimits,
                config.docker.volumes,
                config.docker.shm_size,
                render(protect_args(config.docker.extra_args), "show"),
            ],
            "nodes": [[s.name, s.rank, s.iface, s.ip, s.rdma, s.infiniband, _shown_env(s.env)] for s in spots],
            **({"files": sorted(ctx.files)} if ctx.files else {}),
        }
    )
    if engine_mod is not None and mode in engine_mod.modes and head_ip and tp >= 1 and pp >= 1:
        plan.steps = _with_files(engine_mod.steps(ctx), spots, opts.files)
    for spot in spots:
        plan.nodes.append(
            NodePlan(
                name=spot.name,
                rank=spot.rank,
                role=spot.role,
                iface=spot.iface,
                ip=spot.ip,
                rdma=spot.rdma,
                container=ctx.container(spot),
                env=_shown_env(spot.env),
                commands=[s.display for s in plan.steps if s.node == spot.name],
            )
        )
    plan.errors, plan.warnings = c.errors, c.warnings
    return plan


def _narrow(order: list[str], facts: dict[str, NodeFacts], opts: PlanOptions, c: _Checks) -> list[str]:
    """Without --nodes, the first nodes (head first) that the choices need: no more than a recipe's
    max_nodes, and no more than TP x PP fills when every node has the head's GPU count."""
    limit, why = None, ""
    if opts.node_limit is not None and 0 < opts.node_limit < len(order):
        limit, why = opts.node_limit, f"the recipe runs on at most {opts.node_limit}"
    f = facts.get(order[0]) if order else None
    per = f.gpu.count if f is not None and f.reachable else 0
    want = (opts.tp or 0) * (opts.pp or 1)
    if per > 0 and want and want % per == 0 and want // per < (limit or len(order)):
        limit, why = want // per, f"TP {opts.tp} x PP {opts.pp or 1} fills {want // per} node(s) of {per} GPU(s)"
    if limit is None:
        return order
    c.warn(f"using {limit} of {len(order)} nodes ({', '.join(order[:limit])}): {why}; --nodes picks others")
    return order[:limit]


def _with_files(steps: list[Step], spots: list[Spot], files: dict[str, str]) -> list[Step]:
    """Each node writes the carried files just before its first step (its container needs them mounted)."""
    if not files:
        return steps
    out: list[Step] = []
    done: set[str] = set()
    for step in steps:
        if step.node not in done:
            done.add(step.node)
            rank = next((s.rank for s in spots if s.name == step.node), step.rank)
            out.append(plan_files.file_step(step.node, rank, files))
        out.append(step)
    return out


def health_paths(engine: str) -> tuple[str, ...]:
    return get_engine(engine).health_paths
