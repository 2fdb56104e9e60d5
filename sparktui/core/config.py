"""Cluster configuration: YAML in, typed and validated objects out.

Every error names FILE:LINE:COL, what is wrong and what was expected (ConfigError).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

GPU_STYLES = ("gpus-all", "runtime-nvidia", "cdi", "none")
HOST_KEY_POLICIES = ("strict", "accept-new")


class ConfigError(Exception):
    """A config problem at FILE:LINE:COL; str() is the full one-line message."""

    def __init__(self, file: str, line: int, col: int, what: str, expected: str = ""):
        self.file, self.line, self.col, self.what, self.expected = file, line, col, what, expected
        tail = f" ({expected})" if expected else ""
        super().__init__(f"{file}:{line}:{col}: {what}{tail}")


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


@dataclass
class ImagesConfig:
    """Container image per engine."""

    sglang: str = "lmsysorg/sglang:spark"
    vllm: str = "nvcr.io/nvidia/vllm:25.11-py3"


@dataclass
class DockerConfig:
    """How engine containers are run on every node."""

    gpu_style: str = "gpus-all"  # gpus-all | runtime-nvidia | cdi | none
    extra_args: list[str] = field(default_factory=list)  # appended to docker run
    env: dict[str, str] = field(default_factory=dict)  # passed with -e to every container
    ulimits: dict[str, str] = field(default_factory=lambda: {"memlock": "-1", "stack": "67108864"})
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
    mem_fraction: float = 0.85  # --mem-fraction-static / --gpu-memory-utilization
    max_model_len: int | None = None  # context length cap; None = engine default
    hang_after: float = 90.0  # seconds of silence in distributed init before a hang is flagged


@dataclass
class Config:
    """The whole cluster description."""

    cluster: str
    nodes: list[NodeConfig]
    model: ModelConfig
    images: ImagesConfig = field(default_factory=ImagesConfig)
    docker: DockerConfig = field(default_factory=DockerConfig)
    ssh: SshConfig = field(default_factory=SshConfig)
    engine: EngineDefaults = field(default_factory=EngineDefaults)
    keymap: dict[str, str] = field(default_factory=dict)  # binding id -> key(s)
    theme: str | None = None  # theme name; None = the default dark theme
    path: Path | None = None  # file it was read from

    @property
    def head(self) -> NodeConfig:
        return next(n for n in self.nodes if n.role == "head")

    def node(self, name: str) -> NodeConfig:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; raises ConfigError."""
    raise NotImplementedError


def find_config(explicit: str | None = None) -> Path:
    """--config, then $SPARKTUI_CONFIG, ./sparktui.yaml, the XDG config dir."""
    raise NotImplementedError
