"""Fast SSH tier: in-process asyncssh servers on 127.0.0.1 running commands as local subprocesses, each
in a HOME of its own beside the test's tmp_path (tests/hermetic.py), never the user's."""

from __future__ import annotations

from pathlib import Path

import asyncssh
import pytest

from sparktui.core.config.config import Config, ModelConfig, NodeConfig, SshConfig
from sparktui.demo.sshserver import LocalSshServer


@pytest.fixture(scope="session")
def client_key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


@pytest.fixture
def ssh_env(tmp_path: Path, client_key):
    """Factory: start n servers; returns (config, servers) with known_hosts and key written."""
    started: list[LocalSshServer] = []

    async def make(n: int = 1, trust: bool = True, **ssh_opts) -> tuple[Config, list[LocalSshServer]]:
        key_path = tmp_path / "id_ed25519"
        if not key_path.exists():
            key_path.write_bytes(client_key.export_private_key())
            key_path.chmod(0o600)
        kh = tmp_path / "known_hosts"
        nodes, servers = [], []
        for i in range(n):
            hk = asyncssh.generate_private_key("ssh-ed25519")
            srv = await LocalSshServer(hk, [client_key], host="127.0.0.1").start()
            started.append(srv)
            servers.append(srv)
            if trust:
                with kh.open("a") as f:
                    f.write(f"[127.0.0.1]:{srv.port} {hk.export_public_key('openssh').decode()}")
            nodes.append(
                NodeConfig(
                    name=f"n{i + 1}",
                    host="127.0.0.1",
                    port=srv.port,
                    user="root",
                    identity_file=str(key_path),
                    role="head" if i == 0 else "worker",
                )
            )
        kh.touch()
        ssh = SshConfig(known_hosts=str(kh), connect_timeout=3, ssh_config=[], **ssh_opts)
        cfg = Config(cluster="t", nodes=nodes, model=ModelConfig(name="m", path=str(tmp_path / "models/m")), ssh=ssh)
        return cfg, servers

    yield make
    # servers are torn down by the event loop closing; explicit stop keeps sockets tidy
    for s in started:
        if s._acceptor is not None:
            s._acceptor.close()
