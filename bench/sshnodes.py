"""In-process SSH nodes on 127.0.0.1 for the benches that drive sparktui's SSH layer without the lab:
a child process serves them (its own event loop, so the bench's measurements see only the client side),
and the bench reads the nodes from a small config.

    child:  asyncio.run(serve_nodes(root, n, env=...))    keys, known_hosts and nodes.json under root,
                                                          "READY" on stdout, serves until stdin closes
    bench:  proc = start_child([...], "the SSH servers");  config = nodes_config(root, "/models/m")
"""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
import sys
from pathlib import Path


async def serve_nodes(root: Path, n: int, **server_kw) -> None:
    """n SSH servers (sparktui.demo.sshserver) taking one client key; returns when the parent closes stdin."""
    import asyncssh

    from sparktui.demo.sshserver import LocalSshServer

    client = asyncssh.generate_private_key("ssh-ed25519")
    key = root / "id_ed25519"
    key.write_bytes(client.export_private_key())
    key.chmod(0o600)
    known, nodes, servers = [], [], []
    for i in range(n):
        hk = asyncssh.generate_private_key("ssh-ed25519")
        srv = await LocalSshServer(hk, [client], host="127.0.0.1", **server_kw).start()
        servers.append(srv)
        known.append(f"[127.0.0.1]:{srv.port} {hk.export_public_key('openssh').decode().strip()}\n")
        nodes.append({"name": f"n{i + 1}", "port": srv.port})
    (root / "known_hosts").write_text("".join(known))
    (root / "nodes.json").write_text(json.dumps(nodes))
    print("READY", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin


def start_child(argv: list[str], what: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a serving child and wait (60 s at most) for its READY line."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    if not ready or proc.stdout.readline().strip() != "READY":
        proc.kill()
        raise SystemExit(f"{what} did not start")
    return proc


def nodes_config(root: Path, model_path: str):
    """A sparktui Config for the nodes serve_nodes wrote under root (host keys checked)."""
    from sparktui.core.config.config import Config, ModelConfig, NodeConfig, SshConfig

    nodes = json.loads((root / "nodes.json").read_text())
    return Config(
        cluster="bench",
        nodes=[
            NodeConfig(
                name=x["name"],
                host="127.0.0.1",
                port=x["port"],
                user="bench",
                identity_file=str(root / "id_ed25519"),
                role="head" if i == 0 else "worker",
            )
            for i, x in enumerate(nodes)
        ],
        model=ModelConfig(name="m", path=model_path),
        ssh=SshConfig(known_hosts=str(root / "known_hosts"), ssh_config=[], connect_timeout=10),
    )
