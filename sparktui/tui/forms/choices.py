"""What the launch form offers, computed from the facts: only choices that can work.

Pure functions; the form widget only displays them and turns the user's picks into PlanOptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.content import Content

from ...core.config.config import Config
from ...core.nodes.facts import NodeFacts, Subnet
from ...core.engines import DEFAULT_ENGINE, ENGINES as REGISTRY, default_mode, runs_ray as engine_runs_ray
from ...core.engines import uses_dist_port as engine_uses_dist_port
from ...core.plan.fit import default_fraction
from ...core.network.paths import data_subnet
from ...core.plan.plan import PlanOptions, _norm_image
from ...core.plan.sizing import AUTO as AUTO_LEN, parse_bytes, refusals

norm_image = _norm_image  # the plan's own reading of image names, so the form and the checks agree

# (label, (engine, mode)) for every engine and mode in the registry: "SGLang", "vLLM (Ray)", "vLLM (native)"
ENGINES: list[tuple[str, tuple[str, str]]] = [
    (e.choice_label(m), (e.name, m)) for e in REGISTRY.values() for m in e.modes
]


def engine_key(engine: str, mode: str) -> str:
    return f"{engine}:{mode}"


def runs_ray(key: str) -> bool:
    """Does this engine:mode choice start a Ray cluster (its GCS port matters, the rendezvous port does not)?"""
    engine, _, mode = key.partition(":")
    return engine_runs_ray(engine, mode)


def uses_dist_port(key: str) -> bool:
    """Does this engine:mode choice dial a torch rendezvous (its dist port matters)?"""
    engine, _, mode = key.partition(":")
    return engine_uses_dist_port(engine, mode)


def engine_options() -> list[tuple[str, str]]:
    return [(label, engine_key(*em)) for label, em in ENGINES]


def gpu_total(facts: dict[str, NodeFacts], nodes: list[str]) -> int:
    """GPUs the plan would use: GPUs per node (the most any node has) times the nodes; 0 = unknown."""
    counts = [facts[n].gpu.count for n in nodes if n in facts and facts[n].reachable]
    return max(counts) * len(nodes) if counts else 0


def parallel_options(gpus: int, heads: int | None = None) -> list[tuple[str, str]]:
    """(label, "tp:pp") with TP x PP equal to the GPUs; a TP that does not divide the heads is left out."""
    if gpus < 1:
        return [("TP 1 × PP 1 (no GPUs found)", "1:1")]
    out = []
    for tp in range(gpus, 0, -1):
        if gpus % tp or (heads and heads % tp):
            continue
        pp = gpus // tp
        out.append((f"TP {tp} × PP {pp}", f"{tp}:{pp}"))
    return out or [(f"TP {gpus} × PP 1", f"{gpus}:1")]


def image_options(facts: dict[str, NodeFacts], nodes: list[str], default: str, engine: str) -> list[tuple[str, str]]:
    """Images found on the nodes, those on every node first; the configured default is always offered."""
    live = [n for n in nodes if n in facts and facts[n].reachable]
    where: dict[str, list[str]] = {}
    for n in live:
        for ref in facts[n].docker.images:
            where.setdefault(norm_image(ref), []).append(n)
    default_n = norm_image(default)
    where.setdefault(default_n, [])

    def rank(ref: str) -> tuple:
        return (len(where[ref]) < len(live), ref != default_n, engine not in ref, ref)

    out = []
    for ref in sorted(where, key=rank):
        count = len(where[ref])
        if count == len(live) and live:
            note = "all nodes"
        elif count:
            note = f"only {', '.join(where[ref])}"
        else:
            note = "not on any node"
        out.append((f"{ref}  ({note})", ref))
    return out


AUTO = "auto"  # the rendezvous value meaning "the fabric", resolved (and refused when down) by the plan


def subnet_options(subnets: list[Subnet], nodes: list[str]) -> list[tuple[str, str]]:
    """The fabric first (auto: never off it unasked), then subnets joining all nodes, each with what it means."""
    out = [("auto: the fabric", AUTO)]
    for s in subnets:
        if not s.joins(nodes):
            continue
        data = data_subnet(s, subnets, nodes) if s.management else None
        bits = [s.subnet]
        if data is None:  # a bootstrap-only subnet carries no NCCL data, TCP or not
            bits.append("RDMA" if s.rdma else "TCP")
        if s.speed_mbps:
            bits.append(f"{s.speed_mbps // 1000}G" if s.speed_mbps >= 1000 else f"{s.speed_mbps}M")
        if s.management and data is not None:  # NVIDIA's own setup: bootstrap here, tensors over the HCAs
            bits.append(f"management: bootstrap here, data over RDMA on {data.subnet}")
        elif s.management:
            bits.append("⚠ management: NCCL over TCP, slower")
        if not s.up:
            bits.append("✗ down")
        out.append((" ".join(bits), s.subnet))
    return out


def subnet_detail(s: Subnet | None, nodes: list[str], subnets: list[Subnet] = ()) -> Content:
    """Per node: interface, IP, RDMA device on the subnet; what a management subnet carries (subnets: all of
    them, to find the RDMA fabric that would carry the data)."""
    if s is None:
        return Content.styled("no subnet joins all nodes", "$error")
    lines = []
    for n in nodes:
        a = s.nodes.get(n)
        if a is None:
            lines.append(Content.assemble((n, "bold"), " ", ("not on this subnet", "$error")))
            continue
        lines.append(
            Content.assemble(
                (n, "bold"), f" {a.iface} {a.ip} ", (a.rdma or "no RDMA", "$success" if a.rdma else "$warning")
            )
        )
    data = data_subnet(s, list(subnets), nodes) if s.management else None
    if s.management and data is not None:
        lines.append(
            Content.styled(
                f"management subnet: NCCL bootstraps here, its data goes over RDMA on "
                f"{data.subnet} (NCCL_IB_HCA), as NVIDIA's cluster setup runs it",
                "$success",
            )
        )
    elif s.management:
        lines.append(Content.styled("⚠ management subnet: NCCL would run over TCP here", "$warning"))
    for note in s.notes:
        lines.append(Content.styled(f"⚠ {note}", "$warning"))
    return Content("\n").join(lines)


@dataclass
class FormValues:
    """The form's raw values, as typed."""

    engine: str = engine_key(DEFAULT_ENGINE, default_mode(DEFAULT_ENGINE))
    image: str | None = None
    parallel: str = "1:1"
    rendezvous: str | None = None
    port: str = ""
    dist_port: str = ""
    ray_port: str = ""
    mem_fraction: str = ""
    kv_cache: str = ""  # bytes such as 20G; empty: the memory fraction sizes it
    context: str = ""  # tokens, or auto; empty: the config's length


@dataclass
class Refused:
    """What the image's release cannot do, in the plan's words (core/plan/sizing.py); None where it can."""

    kv_cache: str | None = None
    auto_len: str | None = None


def sizing_refusals(key: str, version: str | None) -> Refused:
    """For the engine:mode choice and the release the plan found in the image."""
    return Refused(*refusals(REGISTRY.get(key.partition(":")[0]), version))


@dataclass
class Parsed:
    options: PlanOptions
    errors: dict[str, str] = field(default_factory=dict)  # field id -> message, shown under the field


def _port(raw: str, what: str, errors: dict[str, str], key: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    try:
        p = int(raw)
    except ValueError:
        errors[key] = f"{what} must be a whole number"
        return None
    if not 0 < p < 65536:
        errors[key] = f"{what} must be 1-65535"
        return None
    return p


def _kv_cache(raw: str, refused: str | None, errors: dict[str, str]) -> int | None:
    """A greyed-out field (the release lacks the flag) keeps its text but asks for nothing."""
    if not raw.strip() or refused:
        return None
    try:
        size = parse_bytes(raw)
    except ValueError:
        errors["kv_cache"] = "KV cache must be bytes such as 20G or 512M (empty: the memory fraction)"
        return None
    if size <= 0:
        errors["kv_cache"] = "KV cache must be above 0 (empty: the memory fraction)"
        return None
    return size


def _context(raw: str, refused: str | None, errors: dict[str, str]) -> tuple[int | None, bool]:
    """(length, auto) from the context field; auto where the release lacks it is an error, named as the plan would."""
    raw = raw.strip()
    if not raw:
        return None, False
    if raw.lower() == AUTO_LEN:
        if refused:
            errors["context"] = refused
            return None, False
        return None, True
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        errors["context"] = f"context length must be a whole number of tokens or {AUTO_LEN}"
        return None, False
    return n, False


def parse_form(v: FormValues, nodes: list[str], refused: Refused | None = None) -> Parsed:
    """PlanOptions from the form; field errors keep their field's default so the preview still runs."""
    refused = refused or Refused()
    errors: dict[str, str] = {}
    max_len, auto_len = _context(v.context, refused.auto_len, errors)
    engine, _, mode = v.engine.partition(":")
    tp_s, _, pp_s = v.parallel.partition(":")
    mem = None
    if v.mem_fraction.strip():
        try:
            mem = float(v.mem_fraction)
        except ValueError:
            errors["mem_fraction"] = "memory fraction must be a number such as 0.85"
        else:
            if not 0 < mem <= 1:
                errors["mem_fraction"] = "memory fraction must be above 0 and at most 1"
                mem = None
    opts = PlanOptions(
        engine=engine,
        mode=mode or None,
        image=v.image or None,
        tp=int(tp_s or 1),
        pp=int(pp_s or 1),
        nodes=list(nodes),
        rendezvous=None if v.rendezvous in (None, "", AUTO) else v.rendezvous,
        port=_port(v.port, "HTTP port", errors, "port"),
        dist_port=_port(v.dist_port, "rendezvous port", errors, "dist_port"),
        ray_port=_port(v.ray_port, "Ray port", errors, "ray_port"),
        mem_fraction=mem,
        kv_cache_bytes=_kv_cache(v.kv_cache, refused.kv_cache, errors),
        max_model_len=max_len,
        max_model_len_auto=auto_len,
    )
    return Parsed(opts, errors)


def defaults(config: Config, engine: str) -> FormValues:
    e = config.engine
    return FormValues(
        engine=engine_key(engine, default_mode(engine)),
        image=config.image_for(engine) or "",
        port=str(config.port_for(engine)),
        dist_port=str(e.dist_port),
        ray_port=str(e.ray_port),
        mem_fraction=f"{default_fraction(engine, e.mem_fraction):g}",
    )


def node_order(config: Config) -> list[str]:
    """Rank order: the head first, then the others as configured."""
    head = config.head.name
    return [head] + [n.name for n in config.nodes if n.name != head]
