"""An in-process SSH server that runs each command in a local subprocess.

Used by the fast test tier, the benchmarks and `sparktui demo` (simulated nodes on 127.0.0.1).
Each server can carry its own environment (PATH with shims, a state directory) so several
"nodes" live in one process without root.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh


@dataclass
class ServerStats:
    open_channels: int = 0
    peak_channels: int = 0
    commands: list[str] = field(default_factory=list)


class _Server(asyncssh.SSHServer):
    def __init__(self, owner: "LocalSshServer"):
        self.owner = owner

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.owner.connections.append(conn)

    def connection_lost(self, exc) -> None:
        self.owner.connections[:] = [c for c in self.owner.connections if not c.is_closed()]

    def begin_auth(self, username: str) -> bool:
        return True  # public key auth below decides


class LocalSshServer:
    """Listens on host:port (port 0 = free port); commands run with `sh -c` in `cwd` with `env`."""

    def __init__(self, host_key: asyncssh.SSHKey, authorized: list[asyncssh.SSHKey],
                 host: str = "127.0.0.1", port: int = 0, env: dict[str, str] | None = None,
                 cwd: str | Path | None = None):
        self.host_key = host_key
        self.authorized = authorized
        self.host = host
        self.port = port
        self.env = dict(os.environ, **(env or {}))
        self.cwd = str(cwd) if cwd else None
        self.stats = ServerStats()
        self.connections: list[asyncssh.SSHServerConnection] = []
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._procs: set[asyncio.subprocess.Process] = set()

    async def start(self) -> "LocalSshServer":
        keys = asyncssh.import_authorized_keys(
            "".join(k.export_public_key("openssh").decode() for k in self.authorized)
        )
        self._acceptor = await asyncssh.listen(
            self.host, self.port, server_factory=lambda: _Server(self),
            server_host_keys=[self.host_key], authorized_client_keys=keys,
            process_factory=self._handle, encoding=None, allow_scp=False,
        )
        self.port = self._acceptor.sockets[0].getsockname()[1]
        return self

    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        cmd = process.command or "sh"
        self.stats.commands.append(cmd)
        self.stats.open_channels += 1
        self.stats.peak_channels = max(self.stats.peak_channels, self.stats.open_channels)
        try:
            proc = await asyncio.create_subprocess_exec(
                "sh", "-c", cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.env, cwd=self.cwd, start_new_session=True,
            )
            self._procs.add(proc)
            feed = asyncio.ensure_future(self._feed(process.stdin, proc.stdin))
            try:
                await asyncio.gather(self._pump(proc.stdout, process.stdout),
                                     self._pump(proc.stderr, process.stderr))
                code = await proc.wait()
            finally:
                feed.cancel()
                self._procs.discard(proc)
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, 15)
            process.exit(code if code >= 0 else 128 - code)
        except (asyncssh.Error, OSError):
            process.exit(255)
        finally:
            self.stats.open_channels -= 1

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer) -> None:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()

    @staticmethod
    async def _feed(reader, writer: asyncio.StreamWriter) -> None:
        """Client stdin -> process stdin; EOF from the client closes the process's stdin."""
        with contextlib.suppress(Exception):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        with contextlib.suppress(Exception):
            writer.close()

    def drop_connections(self) -> None:
        """Cut every client connection abruptly (a link going down)."""
        for c in list(self.connections):
            c.abort()

    async def stop(self) -> None:
        if self._acceptor:
            self._acceptor.close()
            await self._acceptor.wait_closed()
            self._acceptor = None
        for c in list(self.connections):
            c.close()
        for p in list(self._procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
