"""An in-process SSH server that runs each command in a local subprocess.

Used by the fast test tier, the benchmarks and `sparktui demo` (simulated nodes on 127.0.0.1).
Each server can carry its own environment (PATH with shims, a state directory) so several
"nodes" live in one process without root. For `sparktui demo` a server can also run every command
through a prefix (nsenter into the node's namespaces), accept the keys listed in the node's own
authorized_keys (node-to-node logins), listen on several addresses and allow local forwards.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.remote.sshlib import asyncssh


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

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return self.owner.key_allowed(key)

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int):
        # Local forwards (`Node.forward`) reach the engines' HTTP ports; refused unless asked for.
        return self.owner.forwarding


def _blobs(text: str) -> set[bytes]:
    """Public key blobs (wire format) of an authorized_keys text; options and comments ignored."""
    out: set[bytes] = set()
    for line in text.splitlines():
        for word in line.split():
            if word.startswith("AAAA"):
                with contextlib.suppress(ValueError, binascii.Error):
                    out.add(base64.b64decode(word, validate=True))
    return out


class LocalSshServer:
    """Listens on host:port (port 0 = free port); commands run with `sh -c` in `cwd` with `env`.

    host may be a list of addresses (one port for all). prefix: argv put before `sh -c CMD`.
    authorized_keys_file: a file read at each login whose keys are accepted too.
    inherit_env=False gives commands only `env` (a node that should not see this machine's variables).
    """

    def __init__(
        self,
        host_key: asyncssh.SSHKey,
        authorized: list[asyncssh.SSHKey],
        host: str | list[str] = "127.0.0.1",
        port: int = 0,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        *,
        prefix: list[str] | None = None,
        authorized_keys_file: str | Path | None = None,
        forwarding: bool = False,
        inherit_env: bool = True,
    ):
        self.host_key = host_key
        self.authorized = authorized
        self.host = host
        self.port = port
        self.env = dict(os.environ, **(env or {})) if inherit_env else dict(env or {})
        self.cwd = str(cwd) if cwd else None
        self.prefix = list(prefix or [])
        self.authorized_keys_file = Path(authorized_keys_file) if authorized_keys_file else None
        self.forwarding = forwarding
        self.stats = ServerStats()
        self.connections: list[asyncssh.SSHServerConnection] = []
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._procs: set[asyncio.subprocess.Process] = set()

    def key_allowed(self, key: asyncssh.SSHKey) -> bool:
        if any(key.public_data == k.public_data for k in self.authorized):
            return True
        if self.authorized_keys_file is None:
            return False
        try:
            text = self.authorized_keys_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return key.public_data in _blobs(text)

    async def start(self) -> "LocalSshServer":
        self._acceptor = await asyncssh.listen(
            self.host,
            self.port,
            server_factory=lambda: _Server(self),
            server_host_keys=[self.host_key],
            process_factory=self._handle,
            encoding=None,
            allow_scp=False,
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
                *self.prefix,
                "sh",
                "-c",
                cmd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
            self._procs.add(proc)
            feed = asyncio.ensure_future(self._feed(process.stdin, proc.stdin))
            try:
                await asyncio.gather(self._pump(proc.stdout, process.stdout), self._pump(proc.stderr, process.stderr))
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
