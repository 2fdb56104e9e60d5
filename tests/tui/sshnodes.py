"""Simulated nodes for the TUI: in-process SSH servers on 127.0.0.1 whose GPU, Docker, `ip` and RDMA
tools are shims answering with recorded output of two DGX Sparks (tests/unit/samples/probes).

`start_nodes()` is used by the SSH pilot test; run as a script it writes a config for the tmux test
and the benchmark, prints `READY <config path>` and serves until stdin closes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import asyncssh

from sparktui.core.config.config import Config, EngineDefaults, ModelConfig, NodeConfig, SshConfig
from sparktui.demo.sshserver import LocalSshServer

from tests import configs

PROBES = Path(__file__).resolve().parents[1] / "unit" / "samples" / "probes"

SHIMS = {
    "nvidia-smi": 'cat "$SPARKTUI_TEST_NODE/nvidia-smi.csv"\n',
    "ibdev2netdev": 'cat "$SPARKTUI_TEST_NODE/ibdev2netdev.txt"\n',
    "ip": 'case "$*" in *addr*) cat "$SPARKTUI_TEST_NODE/ip.json" ;; *) echo "ip: $*: not simulated" >&2; exit 1 ;; esac\n',
    "docker": (
        'case "$1 $2" in\n'
        '  "version --format") echo 28.3.3 ;;\n'
        '  "images --format") cat "$SPARKTUI_TEST_NODE/docker-images.jsonl" ;;\n'
        '  "image ls") cat "$SPARKTUI_TEST_NODE/docker-image-ids.txt" ;;\n'
        '  "ps -a") : ;;\n'
        '  *) echo "docker: $*: not simulated" >&2; exit 1 ;;\n'
        "esac\n"
    ),
}


def _node_dir(root: Path, name: str, sample: str) -> Path:
    d = root / name
    (d / "bin").mkdir(parents=True, exist_ok=True)
    for tool, body in SHIMS.items():
        p = d / "bin" / tool
        p.write_text("#!/bin/sh\n" + body)
        p.chmod(0o755)
    shutil.copy(PROBES / "nvidia-smi-gb10.csv", d / "nvidia-smi.csv")
    shutil.copy(PROBES / "ibdev2netdev-spark.txt", d / "ibdev2netdev.txt")
    shutil.copy(PROBES / f"ip-addr-{sample}.json", d / "ip.json")
    shutil.copy(PROBES / "docker-images.jsonl", d / "docker-images.jsonl")
    shutil.copy(PROBES / "docker-image-ids.txt", d / "docker-image-ids.txt")
    return d


async def start_nodes(root: Path, n: int = 2, hang_after: float = 90.0) -> tuple[Config, list[LocalSshServer]]:
    """n nodes (spark1..n; the ip samples alternate between two Sparks) and a config that reaches them."""
    root.mkdir(parents=True, exist_ok=True)
    client = asyncssh.generate_private_key("ssh-ed25519")
    key = root / "id_ed25519"
    key.write_bytes(client.export_private_key())
    key.chmod(0o600)
    kh = root / "known_hosts"
    model = root / "models" / "m"
    model.mkdir(parents=True, exist_ok=True)
    (model / "model-00001-of-00001.safetensors").write_bytes(b"\0" * 4096)
    nodes, servers, lines = [], [], []
    for i in range(n):
        name = f"spark{i + 1}"
        d = _node_dir(root, name, "spark1" if i % 2 == 0 else "spark2")
        hk = asyncssh.generate_private_key("ssh-ed25519")
        env = {"PATH": f"{d / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}", "SPARKTUI_TEST_NODE": str(d)}
        srv = await LocalSshServer(hk, [client], host="127.0.0.1", env=env, cwd=d).start()
        servers.append(srv)
        lines.append(f"[127.0.0.1]:{srv.port} {hk.export_public_key('openssh').decode().strip()}\n")
        nodes.append(
            NodeConfig(
                name=name,
                host="127.0.0.1",
                port=srv.port,
                user="root",
                identity_file=str(key),
                role="head" if i == 0 else "worker",
            )
        )
    kh.write_text("".join(lines))
    ssh = SshConfig(known_hosts=str(kh), connect_timeout=5, ssh_config=[], keepalive_interval=5)
    cfg = Config(
        cluster="sim",
        nodes=nodes,
        model=ModelConfig(name="m", path=str(model)),
        ssh=ssh,
        engine=EngineDefaults(hang_after=hang_after),
    )
    return cfg, servers


def stop_nodes(servers: list[LocalSshServer]) -> None:
    for s in servers:
        if s._acceptor is not None:
            s._acceptor.close()
        for c in list(s.connections):
            c.close()


def write_config(cfg: Config, path: Path) -> Path:
    """The config as YAML, for the app run from a terminal."""
    return configs.write_config(cfg, path, sort_keys=False)


async def _serve(root: Path, n: int) -> None:
    cfg, servers = await start_nodes(root, n)
    path = write_config(cfg, root / "config.yaml")
    print(f"READY {path}", flush=True)
    # Serve until whoever started us closes our stdin (or dies): no timers, no orphans.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    stop_nodes(servers)


if __name__ == "__main__":
    asyncio.run(_serve(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2))
