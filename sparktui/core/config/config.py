"""Cluster configuration: YAML in, typed and validated objects out.

Every error names FILE:LINE:COL, what is wrong and what was expected (ConfigError).
Head rule: exactly one node may say `role: head`; when none does, the first node is the head.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import stat
from dataclasses import dataclass, field, fields
from pathlib import Path
import yaml

from sparktui.core.config.secrets import add_names, shorten
from sparktui.core.config.yamlpos import MAX_BYTES, EMPTY, NULL, STR, ConfigError, Source, at, did_you_mean, kind

__all__ = [
    "GPU_STYLES",
    "HOST_KEY_POLICIES",
    "ROLES",
    "ConfigError",
    "ConfigNotFound",
    "Config",
    "NodeConfig",
    "ModelConfig",
    "ImagesConfig",
    "DockerConfig",
    "SshConfig",
    "EngineDefaults",
    "EngineSettings",
    "MemoryConfig",
    "load_config",
    "load_config_text",
    "find_config",
    "user_config_path",
]

GPU_STYLES = ("gpus-all", "runtime-nvidia", "cdi", "none")
HOST_KEY_POLICIES = ("strict", "accept-new")
ROLES = ("head", "worker")
# Node names become container and file names: a leading '-' or '.' would read as an option or a hidden file.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")  # 63 at most: it goes into container names
IFNAME = re.compile(r"[^\s/:]{1,15}\Z")  # what the Linux kernel accepts (IFNAMSIZ 16 with the NUL)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
NO_SPACE = re.compile(r"\S+\Z")
ULIMITS = (
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
)  # what docker run --ulimit knows
ULIMIT_VALUE = re.compile(r"-?\d+(:-?\d+)?\Z")
SECRET_NAME = re.compile(r"(--?[A-Za-z][A-Za-z0-9_-]*|[A-Za-z_][A-Za-z0-9_]*)\Z")
SECRET_HINT = "a variable or flag name such as WANDB_API_KEY or --license"
SIZE = re.compile(r"\d+(\.\d+)?\s*([kmgtpKMGTP]i?)?[bB]?\Z")  # docker's RAMInBytes units


class ConfigNotFound(ConfigError):
    """No config file at any of the places looked; .looked lists them in order."""

    def __init__(self, looked: list[str], why: str = "no config file found"):
        self.looked = looked
        super().__init__(
            "sparktui",
            0,
            0,
            f"{why}; looked at: " + ", ".join(looked),
            "create one with `sparktui init`, or on screen by running `sparktui`; or pass --config FILE",
        )


@dataclass
class NodeConfig:
    """One machine of the cluster."""

    name: str  # short unique name shown everywhere
    host: str  # IP, hostname or ~/.ssh/config alias
    user: str | None = None  # SSH user; None = ssh config / current user
    port: int | None = None  # SSH port; None = ssh config / 22
    identity_file: str | None = None  # private key path; None = agent / ssh config
    role: str = "worker"  # head | worker; exactly one head
    interfaces: dict[str, str] = field(default_factory=dict)  # subnet CIDR -> interface name override


@dataclass
class ModelConfig:
    """The model to serve."""

    name: str  # served model name (OpenAI "model" field)
    path: str  # directory holding the checkpoint, same path on every node
    source: str | None = None  # node that holds it first; None = the head
    copy_streams: int = 8  # most parallel rsync streams of one copy (fewer on a sender with fewer cores)


@dataclass
class ImagesConfig:
    """Container image per engine."""

    # NVIDIA/dgx-spark-playbooks nvidia/sglang/README.md (commit 0db7c14, 2026-07-24): `lmsysorg/sglang:latest-cu130`;
    # the `spark` tag left that playbook on 2026-03-16 (commit b7deea5).
    sglang: str = "lmsysorg/sglang:latest-cu130"  # image that runs SGLang, same ID on every node
    # NGC's vLLM images ship without Ray from 26.05-py3 (nvidia/vllm/README.md, same commit): plans for an
    # image without Ray default to vLLM's native multi-node mode (image.default_mode).
    vllm: str = "nvcr.io/nvidia/vllm:26.10-py3"  # image that runs vLLM (0.31.0 inside), same ID on every node


@dataclass
class DockerConfig:
    """How engine containers are run on every node."""

    gpu_style: str = "gpus-all"  # gpus-all | runtime-nvidia | cdi | none
    extra_args: list[str] = field(default_factory=list)  # appended to docker run
    env: dict[str, str] = field(default_factory=dict)  # passed with -e to every container
    # --ulimit NAME=VALUE ("soft" or "soft:hard"; -1 = unlimited)
    ulimits: dict[str, str] = field(default_factory=lambda: {"memlock": "-1", "stack": "67108864"})
    # -v SRC:DST[:OPTS] for every container; a leading ~ means the remote user's home
    volumes: list[str] = field(default_factory=lambda: ["~/.cache/huggingface:/root/.cache/huggingface"])
    shm_size: str | None = None  # --shm-size; None = not passed (ignored with --ipc host)


@dataclass
class SshConfig:
    """SSH behaviour towards the nodes."""

    host_key_policy: str = "strict"  # strict | accept-new
    known_hosts: str | None = None  # None = ~/.ssh/known_hosts
    keepalive_interval: float = 15.0  # seconds between keepalives; a dead link is noticed after 3 misses
    connect_timeout: float = 10.0  # seconds to wait for a node to answer
    max_channels: int = 8  # concurrent channels per node (OpenSSH MaxSessions defaults to 10)
    ssh_config: list[str] | None = None  # extra ssh_config files; None = ~/.ssh/config


@dataclass
class EngineDefaults:
    """Defaults for the launch form and plan options."""

    sglang_port: int = 30000  # SGLang HTTP port on the head
    vllm_port: int = 8000  # vLLM HTTP port on the head
    dist_port: int = 29500  # rendezvous port (--dist-init-addr / --master-port)
    ray_port: int = 6379  # Ray GCS port on the head
    mem_fraction: float | None = None  # --mem-fraction-static / --gpu-memory-utilization; None = NVIDIA's per engine
    max_model_len: int | None = None  # context length cap; None = engine default
    hang_after: float = 90.0  # seconds of silence in distributed init before a hang is flagged
    wedge_after: float = 60.0  # seconds of requests pending with no token generated before a ready endpoint is wedged
    phase_limits: dict[str, float] = field(default_factory=dict)  # silence allowed in a later phase (diagnosis/phases)


@dataclass
class MemoryConfig:
    """The unified-memory guard (core/memory): from container start to serving, on every node."""

    guard: bool = True  # off: the memory is still watched and warned about, but nothing is stopped
    floor: str = "4GiB"  # MemAvailable below this on a node stops the deployment (a size, or a share of MemTotal)
    warn: str = "2GiB"  # how far above the floor the warning starts: a loaded Spark keeps ~6.8 GiB, no warning
    pressure: float = 60.0  # /proc/pressure/memory "full" avg10, in %, above which it stops too
    interval: float = 2.0  # seconds between two readings of a node


@dataclass
class EngineSettings:
    """One entry of the `engines:` map; None keeps images.<engine> / engine.<engine>_port, else the engine's own."""

    image: str | None = None  # image that runs this engine, same ID on every node
    port: int | None = None  # its HTTP port on the head


@dataclass
class Config:
    """The whole cluster description."""

    cluster: str  # cluster name, shown in the UI and in --json output
    nodes: list[NodeConfig]  # the machines; the head first is customary
    model: ModelConfig  # what to serve
    images: ImagesConfig = field(default_factory=ImagesConfig)  # container image per engine
    docker: DockerConfig = field(default_factory=DockerConfig)  # how containers are run
    ssh: SshConfig = field(default_factory=SshConfig)  # how the nodes are reached
    engine: EngineDefaults = field(default_factory=EngineDefaults)  # launch defaults
    keymap: dict[str, str] = field(default_factory=dict)  # binding id -> key(s)
    theme: str | None = None  # theme name; None = the default dark theme
    secrets: list[str] = field(default_factory=list)  # more variable or flag names whose values are masked
    engines: dict[str, EngineSettings] = field(default_factory=dict)  # engine -> its image and port
    memory: MemoryConfig = field(default_factory=MemoryConfig)  # the unified-memory guard
    path: Path | None = None  # file it was read from

    @property
    def head(self) -> NodeConfig:
        return next(n for n in self.nodes if n.role == "head")

    def node(self, name: str) -> NodeConfig:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def image_for(self, engine: str) -> str | None:
        """The engine's image: engines.<engine>.image, else images.<engine>, else the engine's own default."""
        s = self.engines.get(engine)
        if s is not None and s.image:
            return s.image
        return getattr(self.images, engine, None) or _engine_default(engine, "default_image")

    def engine_images(self) -> dict[str, str]:
        """engine -> its image, for every engine in the registry that has one, in registry order."""
        from ..engines import ENGINES  # the engines import this module (DockerConfig)

        return {e: ref for e in ENGINES if (ref := self.image_for(e))}

    def used_images(self) -> dict[str, str]:
        """engine -> its image for the engines this config names (an `images:` key, which the two first
        engines always have, or an `engines:` entry): what the nodes are asked to hold. A registered engine
        the config never names is not required on every node; its image is needed when it is launched."""
        from ..engines import ENGINES

        return {e: ref for e in ENGINES if (e in _IMAGE_KEYS or e in self.engines) and (ref := self.image_for(e))}

    def set_image(self, engine: str, ref: str) -> None:
        """Make `ref` the engine's image where image_for reads it first: an existing engines.<engine>.image,
        else images.<engine> where that key exists, else a new engines.<engine> entry."""
        s = self.engines.get(engine)
        if s is not None and s.image:
            s.image = ref
        elif engine in _IMAGE_KEYS:
            setattr(self.images, engine, ref)
        else:
            self.engines.setdefault(engine, EngineSettings()).image = ref

    def port_for(self, engine: str) -> int | None:
        """The engine's HTTP port: engines.<engine>.port, else engine.<engine>_port, else the engine's own default."""
        s = self.engines.get(engine)
        if s is not None and s.port is not None:
            return s.port
        if f"{engine}_port" in _LEGACY_PORTS:
            return getattr(self.engine, f"{engine}_port")
        return _engine_default(engine, "default_port")


_LEGACY_PORTS = {f.name for f in fields(EngineDefaults) if f.name.endswith("_port")}
_IMAGE_KEYS = {f.name for f in fields(ImagesConfig)}


def default_image(engine: str) -> str | None:
    """The image an engine runs when the config names none: images.<engine>'s default, else the engine's own."""
    return getattr(ImagesConfig(), engine, None) or _engine_default(engine, "default_image")


def _engine_default(engine: str, what: str):
    from ..engines import find_engine  # the engines import this module (DockerConfig)

    e = find_engine(engine)
    return getattr(e, what, None) if e is not None else None


CIDR_HINT = "an IPv4 subnet such as 192.168.100.0/24"  # the network analysis reads IPv4 only
NAME_HINT = "letters, digits, '.', '_' or '-', starting with a letter or digit, at most 63"


def _cidr(src: Source, knode: yaml.Node) -> str:
    raw = src.text(knode, "subnet", expected=CIDR_HINT)
    if "/" in raw:
        try:
            return str(ipaddress.IPv4Network(raw))
        except ValueError:
            pass
        try:  # an address with its prefix (192.168.100.10/24) is a common slip: name its network
            net = ipaddress.IPv4Network(raw, strict=False)
        except ValueError:
            pass
        else:
            raise src.error(knode, f"subnet '{raw}' has host bits set", f"did you mean '{net}'?")
    raise src.error(knode, f"subnet '{raw}' is not a CIDR", CIDR_HINT)


HOST_HINT = "an IP address, a host name (letters, digits, '-', dot-separated labels of at most 63) or an ssh alias"
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?\Z")
USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@\\-]*\$?\Z")  # POSIX names, plus DOMAIN\\user and user@realm
USER_HINT = "a login name: ASCII letters, digits, '.', '_', '-', '@', at most 64 characters"


def _host(src: Source, node: yaml.Node, what: str) -> str:
    """An address or a name the resolver and idna accept; checked here so one bad host stops at load time."""
    value = src.text(node, what, expected=HOST_HINT)
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        ipaddress.ip_address(bare)
        return bare
    except ValueError:
        pass
    if re.fullmatch(r"[\d.]+", value):
        raise src.error(node, f"{what} '{value}' is not an IPv4 address", "four numbers 0-255, e.g. 10.0.0.11")
    if not value.isascii():
        raise src.error(
            node,
            f"{what} '{shorten(value, 60)}' has non-ASCII characters",
            "the ASCII (xn--) form of an international name",
        )
    if len(value) > 253:
        raise src.error(node, f"{what} is {len(value)} characters long", "a host name of at most 253")
    labels = value.split(".")
    for label in labels:
        if not label:
            raise src.error(
                node, f"{what} '{shorten(value, 60)}' has an empty label (two dots, or a dot at an end)", HOST_HINT
            )
        if len(label) > 63:
            raise src.error(node, f"{what} has a label of {len(label)} characters", "labels of at most 63")
        if not _LABEL.match(label):
            raise src.error(node, f"{what} '{shorten(value, 60)}' is not a host name", HOST_HINT)
    return value


def _user(src: Source, node: yaml.Node, what: str) -> str | None:
    if node.tag == NULL:
        return None
    value = src.text(node, what, expected=USER_HINT)
    if len(value) > 64 or not USER.match(value):
        raise src.error(node, f"{what} '{shorten(value, 60)}' is not a login name", USER_HINT)
    return value


def _node(src: Source, node: yaml.Node, index: int) -> tuple[NodeConfig, dict]:
    label = f"nodes[#{index + 1}]"
    name = lambda n, w: src.text(n, w, NODE_NAME, NAME_HINT)
    if isinstance(node, yaml.MappingNode):  # once the name is known good, errors say which node
        items = src.mapping(node, label)
        if "name" in items and items["name"][1].tag != NULL:
            label = f"nodes[{name(items['name'][1], label + '.name')}]"
    ifname = lambda w: lambda v, k: src.text(v, f"{w}[{k}]", IFNAME, "an interface name such as enp1s0f1np1")
    return src.section(
        NodeConfig,
        node,
        label,
        {
            "name": name,
            "host": lambda n, w: _host(src, n, w),
            "user": lambda n, w: _user(src, n, w),
            "port": lambda n, w: src.opt_integer(n, w, 1, 65535),
            "identity_file": lambda n, w: _local_path(src, n, w),
            "role": lambda n, w: src.choice(n, w, ROLES),
            "interfaces": lambda n, w: src.text_map(
                n, w, "subnet CIDR: interface name", lambda k: _cidr(src, k), ifname(w)
            ),
        },
        {"name": "'name: spark1', unique", "host": "'host: 10.0.0.11', an address or ssh alias"},
    )


def _local_path(src: Source, node: yaml.Node, what: str) -> str | None:
    """A path on this machine; ~ is expanded here (remote paths never are)."""
    value = src.opt_text(node, what, expected="a file path")
    return os.path.expanduser(value) if value is not None else None


def _env_value(src: Source, node: yaml.Node, what: str) -> str:
    # An empty value is a legal environment value; only a missing one (null) is a mistake.
    if isinstance(node, yaml.ScalarNode) and node.tag == STR and node.value == "":
        return ""
    return src.text(node, what, expected="a value; write '' for an empty one")


def _keys(src: Source, node: yaml.Node, what: str) -> str:
    expected = "key names such as ctrl+r or f5, comma-separated"
    value = src.text(node, what, expected=expected)
    if not all(NO_SPACE.match(k.strip()) for k in value.split(",")):
        raise src.error(node, f"{what} '{value}' is not a key list", expected)
    return value


def _check_nodes(src: Source, nodes: list[tuple[NodeConfig, dict]]) -> None:
    first: dict[str, yaml.Node] = {}
    for n, items in nodes:
        if n.name in first:
            raise src.error(
                items["name"][1], f"duplicate node name '{n.name}'", f"unique names; first used at {at(first[n.name])}"
            )
        first[n.name] = items["name"][1]
    heads = [(n, items["role"][1]) for n, items in nodes if n.role == "head"]
    if len(heads) > 1:
        (n0, r0), (n1, r1) = heads[:2]
        raise src.error(r1, f"second head '{n1.name}'", f"exactly one head; '{n0.name}' at {at(r0)} is the head")
    if not heads:
        nodes[0][0].role = "head"  # the documented rule: without an explicit head, the first node leads


def _engines(
    src: Source, node: yaml.Node, images: tuple[ImagesConfig, dict], defaults: tuple[EngineDefaults, dict]
) -> dict[str, EngineSettings]:
    """The `engines:` map: engine -> {image, port}; a value also written under images:/engine: must agree."""
    from ..engines import ENGINES  # the engines import this module (DockerConfig)

    def name(k: yaml.Node) -> str:
        n = src.text(k, "engine name", expected="an engine name")
        if n not in ENGINES:
            raise src.error(k, f"unknown engine '{shorten(n)}'", did_you_mean(n, list(ENGINES)))
        return n

    image = lambda n, w: src.opt_text(n, w, NO_SPACE, "an image reference such as repo/name:tag")
    port = lambda n, w: None if n.tag == NULL else src.integer(n, w, 1, 65535)
    out: dict[str, EngineSettings] = {}
    if node.tag == NULL:
        return out
    for knode, vnode in src.mapping(node, "engines", "engine: {image: ..., port: ...}").values():
        eng = name(knode)
        if eng in out:
            raise src.error(knode, f"engines names {eng} twice", "each engine once")
        s, items = src.section(EngineSettings, vnode, f"engines.{eng}", {"image": image, "port": port})
        for key, (obj, written), old in (("image", images, eng), ("port", defaults, f"{eng}_port")):
            mine = getattr(s, key)
            if mine is not None and old in written and getattr(obj, old) != mine:
                section = "images" if key == "image" else "engine"
                raise src.error(
                    items[key][1],
                    f"engines.{eng}.{key} {mine} differs from {section}.{old} {getattr(obj, old)}",
                    f"one of the two (engines.{eng}.{key} is the newer spelling)",
                )
        out[eng] = s
        # the older keys read the same value, so readers of either spelling agree
        if s.image is not None and hasattr(images[0], eng):
            setattr(images[0], eng, s.image)
        if s.port is not None and hasattr(defaults[0], f"{eng}_port"):
            setattr(defaults[0], f"{eng}_port", s.port)
    return out


def _check_engine_ports(
    src: Source, defaults: EngineDefaults, engines: dict[str, EngineSettings], node: yaml.Node
) -> None:
    # engines.<name>.port binds on the head beside the rendezvous and Ray's GCS, like engine.<name>_port
    items = src.mapping(node, "engines") if node.tag != NULL else {}
    for knode, vnode in items.values():
        s = engines[knode.value]
        if s.port is None:
            continue
        for other in ("dist_port", "ray_port"):
            if getattr(defaults, other) == s.port:
                raise src.error(
                    src.mapping(vnode, "engines")["port"][1],
                    f"engines.{knode.value}.port {s.port} is also engine.{other}",
                    "different ports for the rendezvous, Ray and the HTTP server",
                )


def _check_ports(src: Source, engine: EngineDefaults, items: dict) -> None:
    # The head binds these at once: the rendezvous, Ray's GCS and an engine's HTTP port must differ.
    for a, b in (
        ("dist_port", "sglang_port"),
        ("dist_port", "vllm_port"),
        ("dist_port", "ray_port"),
        ("ray_port", "vllm_port"),
    ):
        if getattr(engine, a) == getattr(engine, b):
            set_here = sorted((k for k in (a, b) if k in items), key=lambda k: items[k][1].start_mark.index)
            later = set_here[-1]  # defaults never clash, so at least one of the two was written
            other = b if later == a else a
            raise src.error(
                items[later][1],
                f"engine.{later} {getattr(engine, later)} is also engine.{other}",
                "different ports for the rendezvous, Ray and the HTTP server",
            )


def _model(src: Source, node: yaml.Node, names: list[str]) -> ModelConfig:
    model, items = src.section(
        ModelConfig,
        node,
        "model",
        {
            "name": lambda n, w: src.text(n, w),
            # control characters (newlines above all) break every line-based tool that reads the path back
            "path": lambda n, w: src.text(
                n,
                w,
                re.compile(r"/[^\x00-\x1f\x7f]*\Z"),
                "an absolute path without control characters, the same on every node",
            ),
            "source": lambda n, w: src.opt_text(n, w),
            "copy_streams": lambda n, w: src.integer(n, w, 1, 64),
        },
        {
            "name": "the served name, e.g. 'name: Qwen3.5-122B-A10B-FP8'",
            "path": "the checkpoint directory, e.g. 'path: /models/Qwen3.5-122B-A10B-FP8'",
        },
    )
    if model.source is not None and model.source not in names:
        raise src.error(
            items["source"][1], f"model.source '{model.source}' is not a node", did_you_mean(model.source, names)
        )
    return model


def _docker(src: Source, node: yaml.Node) -> DockerConfig:
    env_name = lambda k, w: src.text(k, f"{w} name", ENV_NAME, "a variable name such as NCCL_DEBUG")
    limit = lambda v, w: src.text(v, w, ULIMIT_VALUE, "soft or soft:hard, -1 = unlimited")
    return src.section(
        DockerConfig,
        node,
        "docker",
        {
            "gpu_style": lambda n, w: src.choice(n, w, GPU_STYLES),
            "extra_args": lambda n, w: src.text_list(n, w),
            "env": lambda n, w: src.text_map(
                n, w, "NAME: value", lambda k: env_name(k, w), lambda v, k: _env_value(src, v, f"{w}.{k}")
            ),
            "ulimits": lambda n, w: src.text_map(
                n,
                w,
                "NAME: soft[:hard]",
                lambda k: src.choice(k, f"{w} name", ULIMITS),
                lambda v, k: limit(v, f"{w}.{k}"),
            ),
            "volumes": lambda n, w: src.text_list(n, w, "SRC:DST[:OPTS]"),
            "shm_size": lambda n, w: src.opt_text(n, w, SIZE, "a size such as 16g"),
        },
    )[0]


def _ssh(src: Source, node: yaml.Node) -> SshConfig:
    return src.section(
        SshConfig,
        node,
        "ssh",
        {
            "host_key_policy": lambda n, w: src.choice(n, w, HOST_KEY_POLICIES),
            "known_hosts": lambda n, w: _local_path(src, n, w),
            "keepalive_interval": lambda n, w: src.number(n, w),
            "connect_timeout": lambda n, w: src.number(n, w),
            "max_channels": lambda n, w: src.integer(n, w, 1, 1024),
            # null keeps the default (~/.ssh/config); an empty list reads no ssh_config at all
            "ssh_config": lambda n, w: (
                None if n.tag == NULL else [os.path.expanduser(p) for p in src.text_list(n, w, "a file path")]
            ),
        },
    )[0]


def _amount(src: Source, node: yaml.Node, what: str) -> str:
    from ..memory.limits import SIZE_HINT, parse_amount

    text = src.text(node, what, expected=SIZE_HINT)  # a bare number (no unit) is refused below
    try:
        parse_amount(text)
    except ValueError as e:
        raise src.error(node, f"{what}: {e}", SIZE_HINT) from None
    return text


def _memory(src: Source, node: yaml.Node) -> MemoryConfig:
    return src.section(
        MemoryConfig,
        node,
        "memory",
        {
            "guard": lambda n, w: src.flag(n, w),
            "floor": lambda n, w: _amount(src, n, w),
            "warn": lambda n, w: _amount(src, n, w),
            "pressure": lambda n, w: src.number(n, w, 100.0),
            "interval": lambda n, w: src.number(n, w),
        },
    )[0]


def _phase(src: Source, node: yaml.Node) -> str:
    from ..state.states import Phase  # the start-up phases that silence limits apply to

    name = src.text(node, "a phase name", expected="a phase name")
    if name not in tuple(Phase):
        raise src.error(node, f"unknown phase '{shorten(name)}'", did_you_mean(name, [p.value for p in Phase]))
    return name  # the plain word: the config is written back as YAML, which knows no enum


def _engine(src: Source, node: yaml.Node) -> tuple[EngineDefaults, dict]:
    port = lambda n, w: src.integer(n, w, 1, 65535)
    engine, items = src.section(
        EngineDefaults,
        node,
        "engine",
        {
            "sglang_port": port,
            "vllm_port": port,
            "dist_port": port,
            "ray_port": port,
            "mem_fraction": lambda n, w: None if n.tag == NULL else src.number(n, w, 1.0),
            "max_model_len": lambda n, w: src.opt_integer(n, w, 1),
            "hang_after": lambda n, w: src.number(n, w),
            "wedge_after": lambda n, w: src.number(n, w),
            "phase_limits": lambda n, w: src.text_map(
                n, w, "phase: seconds", lambda k: _phase(src, k), lambda v, name: src.number(v, f"{w}.{name}")
            ),
        },
    )
    _check_ports(src, engine, items)
    return engine, items


def _config(src: Source, root: yaml.Node | None) -> Config:
    if root is None:
        raise src.error(None, "the file is empty", "a mapping with cluster, nodes and model")
    items = src.mapping(root, "the config")
    src.check_keys(items, [f.name for f in fields(Config) if f.name != "path"], "the config")
    src.require(
        root,
        items,
        {
            "cluster": "'cluster: sparks'",
            "nodes": "a 'nodes:' list, each node with name and host",
            "model": "a 'model:' mapping with name and path",
        },
        "the config",
    )
    val = lambda key: items[key][1] if key in items else EMPTY

    cluster = src.text(val("cluster"), "cluster", re.compile(r".{1,63}\Z"), "a cluster name of at most 63 characters")
    seq = val("nodes")
    if not isinstance(seq, yaml.SequenceNode) or not seq.value:
        found = kind(seq) if not isinstance(seq, yaml.SequenceNode) else "an empty list"
        raise src.error(seq, f"nodes is {found}", "a list of nodes, each with at least name and host")
    nodes = [_node(src, n, i) for i, n in enumerate(seq.value)]
    _check_nodes(src, nodes)
    image = lambda n, w: src.text(n, w, NO_SPACE, "an image reference such as repo/name:tag")
    binding = lambda k: src.text(k, "keymap binding id", NO_SPACE, "a binding id without spaces")
    images = src.section(ImagesConfig, val("images"), "images", {f.name: image for f in fields(ImagesConfig)})
    defaults = _engine(src, val("engine"))
    engines = _engines(src, val("engines"), images, defaults)
    _check_engine_ports(src, defaults[0], engines, val("engines"))
    return Config(
        cluster=cluster,
        nodes=[n for n, _ in nodes],
        model=_model(src, val("model"), [n.name for n, _ in nodes]),
        images=images[0],
        docker=_docker(src, val("docker")),
        ssh=_ssh(src, val("ssh")),
        engine=defaults[0],
        engines=engines,
        keymap=src.text_map(
            val("keymap"), "keymap", "binding id: keys", binding, lambda v, k: _keys(src, v, f"keymap.{k}")
        ),
        theme=src.opt_text(val("theme"), "theme", NO_SPACE, "a theme name"),
        secrets=src.text_list(val("secrets"), "secrets", SECRET_HINT, SECRET_NAME),
        memory=_memory(src, val("memory")),
    )


def load_config_text(text: str, filename: str = "<config>") -> Config:
    """Validate config YAML given as text; errors name `filename`. Config.path stays None."""
    src = Source(text, filename)
    return _config(src, src.compose())


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; raises ConfigError. The file's Path lands in Config.path."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)  # a huge file (or /dev/zero) is not read whole
    except OSError as e:
        raise ConfigError(
            shorten(path, 200), 0, 0, f"cannot read: {e.strerror or type(e).__name__}", "expected a readable YAML file"
        ) from None
    if len(data) > MAX_BYTES:
        raise ConfigError(shorten(path, 200), 0, 0, "the file is larger than 1 MiB", "expected a config of a few KiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ConfigError(shorten(path, 200), line, col, "the file is not UTF-8 text", "expected UTF-8 YAML") from None
    cfg = load_config_text(text, str(path))
    cfg.path = path
    add_names(cfg.secrets)  # from here on every output of this process masks them too
    return cfg


def user_config_path() -> Path:
    """$XDG_CONFIG_HOME/sparktui/config.yaml (default ~/.config/sparktui/config.yaml)."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".config"  # XDG: relative values are ignored
    return base / "sparktui" / "config.yaml"


# what CPython 3.11-3.13's Path.is_file and Path.exists took for "not there" (the rest they raised)
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def find_config(explicit: str | Path | None = None) -> Path:
    """--config, then $SPARKTUI_CONFIG, ./sparktui.yaml, $XDG_CONFIG_HOME/sparktui/config.yaml.

    A file named explicitly (--config or the variable) must exist: falling back from it would
    silently drive another cluster.
    """
    for label, value in (("--config", explicit), ("$SPARKTUI_CONFIG", os.environ.get("SPARKTUI_CONFIG"))):
        if value:
            p = Path(os.path.expanduser(str(value)))
            shown = shorten(p, 200)
            # os.stat, not Path.is_file: from CPython 3.14 that answers False to every OSError, and a directory
            # on the way that cannot be read, or a name too long, would read as a file that does not exist
            try:
                if stat.S_ISREG(os.stat(p).st_mode):
                    return p
                why = "is not a file"
            except OSError as e:
                if e.errno in _ABSENT:
                    why = "names a file that does not exist"
                else:  # a directory on the way that cannot be read, a name too long
                    why = f"cannot be looked at ({e.strerror or type(e).__name__})"
            raise ConfigNotFound([f"{label} {shown}"], f"{label} {why}")
    places = [Path("sparktui.yaml"), user_config_path()]
    for p in places:
        try:
            if p.is_file():
                return p
        except OSError:  # unreadable on the way: as good as absent here
            continue
    raise ConfigNotFound(["$SPARKTUI_CONFIG (unset)", "./sparktui.yaml", str(places[1])])
