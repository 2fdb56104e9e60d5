"""Configs for tests, built one way: a Config object (make_config) and its YAML file (write_config).

Tests that hold the YAML text itself (a config error's line and column, the reference's example) keep it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sparktui.core.config.config import Config, EngineDefaults, ModelConfig, NodeConfig

MODEL = "/models/Qwen3.5-122B-A10B-FP8"
_OMIT = object()


def node_name(i: int) -> str:
    return f"spark{i + 1}"


def make_config(
    n: int = 2,
    *,
    hosts: dict[str, str] | None = None,
    user: str | None = "ubuntu",
    model_name: str = "qwen3.5-122b",
    model_path: str = MODEL,
    engine: EngineDefaults | None = None,
    keymap: dict[str, str] | None = None,
    theme: str | None = None,
    **docker: Any,
) -> Config:
    """n nodes spark1..n (the first the head) at 10.0.0.11.. unless `hosts` names them; `docker` sets
    fields of the docker section."""
    nodes = [
        NodeConfig(
            node_name(i),
            (hosts or {}).get(node_name(i), f"10.0.0.{11 + i}"),
            user=user,
            role="head" if i == 0 else "worker",
        )
        for i in range(n)
    ]
    cfg = Config(
        cluster="sparks",
        nodes=nodes,
        model=ModelConfig(model_name, model_path),
        engine=engine if engine is not None else EngineDefaults(),
        keymap=dict(keymap or {}),
        theme=theme,
    )
    for k, v in docker.items():
        setattr(cfg.docker, k, v)
    return cfg


def write_config(
    cfg: Config, path: Path, *, user: Any = _OMIT, model_name: str | None = None, sort_keys: bool = True, **ssh: Any
) -> Path:
    """`cfg` as a YAML file for a command run from a shell: the nodes (as `user` when given), the model
    (named `model_name` when given) and the ssh section (known_hosts, connect_timeout,
    keepalive_interval, no ~/.ssh/config), each key of which `ssh` replaces or, given None, leaves out."""
    section = {
        "known_hosts": cfg.ssh.known_hosts,
        "connect_timeout": cfg.ssh.connect_timeout,
        "ssh_config": [],
        "keepalive_interval": cfg.ssh.keepalive_interval,
        **ssh,
    }
    doc = {
        "cluster": cfg.cluster,
        "nodes": [
            {
                "name": n.name,
                "host": n.host,
                "port": n.port,
                "user": n.user if user is _OMIT else user,
                "identity_file": n.identity_file,
                "role": n.role,
            }
            for n in cfg.nodes
        ],
        "model": {"name": model_name or cfg.model.name, "path": cfg.model.path},
        "ssh": {k: v for k, v in section.items() if v is not None},
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=sort_keys))
    return path
