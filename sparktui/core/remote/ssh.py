"""One asyncssh connection per node: run(), stream(), forward(), reconnect with backoff.

Every remote command passes through Node._open(), which journals it (secrets masked). Commands are
argv lists quoted here, or strings built with sh()/script(), which quote every value they insert.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Callable, Sequence

from .channels import OPEN_RETRIES, Slots, busy_note, count_sessions, shortfall
from ..config.config import Config, NodeConfig, SshConfig
from ..state.journal import Journal
from ..config.secrets import shorten
from .sshlib import asyncssh

RECONNECT_DELAYS = (0.5, 1, 2, 4, 8, 15, 30)  # backoff; the last value repeats
RECONNECT_ATTEMPTS = 40  # then the background loop gives up (about 15 minutes)
CHUNK = 65536  # characters per read of a stream


def sh(*argv: str) -> str:
    """A shell command line with every argument quoted."""
    return shlex.join(str(a) for a in argv)


def _tail(text: str, lines: int = 4, limit: int = 600) -> str | None:
    kept = [ln.rstrip() for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(kept)[-limit:] or None


def script(template: str, **values: object) -> str:
    """str.format(template) with every inserted value shell-quoted (lists become quoted words)."""
    quoted = {}
    for k, v in values.items():
        if isinstance(v, (list, tuple)):
            quoted[k] = " ".join(shlex.quote(str(x)) for x in v)
        else:
            quoted[k] = shlex.quote(str(v))
    return template.format(**quoted)


class SshError(Exception):
    """Something went wrong talking to a node; str() is a plain sentence for the user."""


class NodeUnreachable(SshError):
    pass


class HostKeyError(SshError):
    pass


@dataclass
class Result:
    exit_status: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


def known_hosts_path(cfg: SshConfig) -> Path:
    """The known_hosts file these settings check keys against (and record trusted ones in)."""
    return Path(os.path.expanduser(cfg.known_hosts or "~/.ssh/known_hosts"))


_known_hosts_path = known_hosts_path


def _reason(e: BaseException) -> str:
    """A plain sentence for a failed dial: the OS error's own words rather than asyncio's."""
    import socket

    if isinstance(e, socket.gaierror):
        return f"cannot resolve the host name ({e.strerror})"
    errno_ = getattr(e, "errno", None)
    if errno_:
        return os.strerror(errno_).lower()
    return str(e) or type(e).__name__


def known_hosts_name(host: str, port: int | None) -> str:
    """How OpenSSH names host in known_hosts: `[host]:port` for a port other than 22 (sshd(8),
    SSH_KNOWN_HOSTS FILE FORMAT); `ssh-keygen -R` must be given this form to find the entry."""
    return host if not port or port == 22 else f"[{host}]:{port}"


def known_hosts_line(host: str, port: int | None, key: asyncssh.SSHKey) -> str:
    """The known_hosts line OpenSSH writes for host (and a port other than 22)."""
    return f"{known_hosts_name(host, port)} {key.export_public_key('openssh').decode().strip()}\n"


def append_known_host(path: Path, host: str, port: int | None, key: asyncssh.SSHKey) -> None:
    """Trust key for host from now on: one line appended to the known_hosts file at path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as f:
        f.seek(0, os.SEEK_END)
        lead = b""
        if f.tell():  # a file whose last line lacks its newline would swallow ours
            f.seek(-1, os.SEEK_END)
            lead = b"" if f.read(1) == b"\n" else b"\n"
        f.write(lead + known_hosts_line(host, port, key).encode())


class _Client(asyncssh.SSHClient):
    """Sees the host key when it is not in known_hosts, so errors can name its fingerprint."""

    def __init__(self, node: "Node"):
        self._node = node

    def validate_host_public_key(self, host, addr, port, key) -> bool:
        return self._node._unknown_host_key(host, addr, port, key)

    def connection_lost(self, exc: Exception | None) -> None:
        self._node._lost(exc)


class Node:
    """One node: a single SSH connection, a cap on concurrent channels, reconnect after a drop."""

    def __init__(
        self,
        config: NodeConfig,
        ssh: SshConfig | None = None,
        journal: Journal | None = None,
        on_change: Callable[["Node"], None] | None = None,
    ):
        self.config = config
        self.name = config.name
        self.ssh = ssh or SshConfig()
        self.journal = journal or Journal()  # a Cluster hands in its journal with the cluster's name set
        self.on_change = on_change
        self.connected = False
        self.error: str | None = None
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self._slots = Slots(self.ssh.max_channels)
        self._closing = False
        self._reconnect_task: asyncio.Task | None = None
        self._host_key_problem: str | None = None
        # (host, port, key) of the last refused unknown key, for a caller that asks the user to trust it
        self.unknown_key: tuple[str, int, asyncssh.SSHKey] | None = None

    # -- connection -------------------------------------------------------------------------
    def _options(self) -> dict:
        c, s = self.config, self.ssh
        opts: dict = {
            "keepalive_interval": s.keepalive_interval,
            "keepalive_count_max": 3,
            "connect_timeout": s.connect_timeout,
            "login_timeout": s.connect_timeout,
        }
        if c.user:
            opts["username"] = c.user
        if c.port:
            opts["port"] = c.port
        if c.identity_file:
            opts["client_keys"] = [os.path.expanduser(c.identity_file)]
        kh = _known_hosts_path(s)
        if s.known_hosts or not kh.exists():
            # a missing file is an empty trust list (asyncssh would fail on it, or fall back to the
            # default file): every key then goes through _unknown_host_key
            opts["known_hosts"] = str(kh) if kh.exists() else asyncssh.import_known_hosts("")
        if s.ssh_config is not None:
            opts["config"] = [os.path.expanduser(p) for p in s.ssh_config]
        return opts

    def _unknown_host_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Called by asyncssh for a key not in known_hosts: refuse (strict), or record a new host."""
        path = _known_hosts_path(self.ssh)
        fp = key.get_fingerprint("sha256")
        alg = key.get_algorithm()
        known = []
        if path.exists():
            with contextlib.suppress(Exception):
                known = list(asyncssh.read_known_hosts(str(path)).match(host, addr, port)[0])
        pflag = f"-p {port} " if port and port != 22 else ""
        if known:
            self._host_key_problem = (
                f"host key for {self.name} ({host}) CHANGED: the node now shows {alg} {fp}, "
                f"which differs from {path}. If the node was reinstalled, remove the old key with "
                f"`ssh-keygen -R {shlex.quote(known_hosts_name(host, port))} -f {shlex.quote(str(path))}` and connect again; "
                f"otherwise someone may be intercepting the connection."
            )
            return False
        if self.ssh.host_key_policy == "accept-new":
            append_known_host(path, host, port, key)
            return True
        self.unknown_key = (host, port, key)
        self._host_key_problem = (
            f"host key for {self.name} ({host}) is unknown: {alg} {fp}. Check it on the node with "
            f"`ssh-keygen -lf /etc/ssh/ssh_host_{alg.replace('ssh-', '').split('-')[0]}_key.pub`, then trust it with "
            f"`ssh-keyscan {pflag}{shlex.quote(host)} >> {shlex.quote(str(path))}` "
            f"(or set ssh.host_key_policy: accept-new)"
        )
        return False

    async def connect(self) -> None:
        """Open the connection (raises NodeUnreachable / HostKeyError with a plain reason)."""
        async with self._lock:
            if self._conn is not None and self.connected:
                return
            self._host_key_problem = None
            self.unknown_key = None
            try:
                conn, _ = await asyncio.wait_for(
                    asyncssh.create_connection(lambda: _Client(self), self.config.host, **self._options()),
                    timeout=self.ssh.connect_timeout + 2,
                )
            except asyncssh.HostKeyNotVerifiable as e:
                self._set(False, self._host_key_problem or f"{self.name}: host key not verified: {e}")
                raise HostKeyError(self.error) from None
            except (asyncio.TimeoutError, TimeoutError):
                self._set(False, f"{self.name} ({self.config.host}): no answer within {self.ssh.connect_timeout:g} s")
                raise NodeUnreachable(self.error) from None
            except asyncssh.PermissionDenied:
                self._set(False, f"{self.name} ({self.config.host}): login refused (check user and key)")
                raise NodeUnreachable(self.error) from None
            except (OSError, asyncssh.Error) as e:
                reason = _reason(e)
                self._set(False, f"{self.name} ({self.config.host}): {reason}")
                raise NodeUnreachable(self.error) from None
            except Exception as e:  # noqa: BLE001 - e.g. a name idna or saslprep refuses: this node's problem only
                self._set(
                    False,
                    f"{self.name} ({shorten(self.config.host, 60)}): cannot connect: "
                    f"{shorten(str(e) or type(e).__name__, 160)}",
                )
                raise NodeUnreachable(self.error) from None
            self._conn = conn
            self._set(True, None)

    def _set(self, connected: bool, error: str | None) -> None:
        changed = connected != self.connected or error != self.error
        self.connected, self.error = connected, error
        if changed and self.on_change:
            self.on_change(self)

    def _lost(self, exc: Exception | None) -> None:
        self._conn = None
        if self._closing:
            self._set(False, None)
            return
        self._set(False, f"{self.name}: connection lost ({exc or 'closed by the node'})")
        if self._reconnect_task is None or self._reconnect_task.done():
            with contextlib.suppress(RuntimeError):
                self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        for attempt in range(RECONNECT_ATTEMPTS):
            if self._closing or self.connected:
                return
            await asyncio.sleep(RECONNECT_DELAYS[min(attempt, len(RECONNECT_DELAYS) - 1)])
            with contextlib.suppress(SshError):
                await self.connect()
                return

    async def _ensure(self) -> asyncssh.SSHClientConnection:
        if self._conn is None or not self.connected:
            if self._closing:
                raise NodeUnreachable(f"{self.name}: connection closed")
            await self.connect()
        assert self._conn is not None
        return self._conn

    async def wait_connected(self, timeout: float) -> bool:
        """Wait until the link is back (reconnecting as needed); False after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        attempt = 0
        while time.monotonic() < deadline:
            try:
                await self._ensure()
                return True
            except SshError:
                delay = RECONNECT_DELAYS[min(attempt, len(RECONNECT_DELAYS) - 1)]
                attempt += 1
                await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        return self.connected

    def server_host_key(self) -> asyncssh.SSHKey | None:
        """The host key the node presented on the current (verified) connection."""
        return self._conn.get_server_host_key() if self._conn is not None else None

    async def close(self) -> None:
        self._closing = True
        if self._reconnect_task:
            self._reconnect_task.cancel()
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
        self._conn = None
        self._set(False, None)

    # -- commands ---------------------------------------------------------------------------
    @property
    def channel_limit(self) -> int:
        """Channels sparktui opens at once on this node: ssh.max_channels, or less once the node refused."""
        return self._slots.limit

    def channel_note(self) -> str:
        """Why channels may be short on this node, in words (for messages about a wait that ran out)."""
        return busy_note(self.name, self._slots)

    async def sessions_available(self, want: int, timeout: float = 30.0) -> int:
        """How many session channels the node accepts at once, counted up to `want` (those sparktui
        holds included); a refusal lowers the cap. 0 when the node cannot be reached."""
        try:
            conn = await self._ensure()
        except SshError:
            return 0
        return await count_sessions(conn, self._slots, want, timeout)

    async def sessions_short(self, want: int, timeout: float = 30.0) -> str | None:
        """Why this node cannot hold `want` SSH sessions at once (None when it can), with the fix."""
        k = await self.sessions_available(want, timeout)
        return shortfall(self.name, k, want, self._slots, self.ssh.max_channels, self.connected, self.error)

    async def _with_channel(self, open_and_use, deadline: float | None = None):
        """Run open_and_use() holding a channel slot; retry when the node refuses the channel.
        Waiting for a slot counts against `deadline` (asyncio.TimeoutError when it passes)."""
        for attempt in range(OPEN_RETRIES):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise asyncio.TimeoutError
            await self._slots.acquire(left)
            try:
                return await open_and_use()
            except asyncssh.ChannelOpenError:
                self._slots.refused()
                if attempt == OPEN_RETRIES - 1:
                    raise
            finally:
                await self._slots.release()
            await asyncio.sleep(min(0.05 * (attempt + 1), 0.5))

    @staticmethod
    def _line(cmd: str | Sequence[str]) -> str:
        return cmd if isinstance(cmd, str) else sh(*cmd)

    async def run(
        self, cmd: str | Sequence[str], timeout: float | None = None, input: str | None = None, shown: str | None = None
    ) -> Result:
        """Run a command; exit 124 on timeout, 255 when the node cannot be reached (like ssh).

        shown: the line to journal instead, when the caller masked it better (structured data)."""
        line = self._line(cmd)
        entry = self.journal.start(self.name, shown or line)
        t0 = time.monotonic()
        try:
            conn = await self._ensure()
        except SshError as e:
            self.journal.finish(entry, 255, str(e))
            return Result(255, "", str(e), time.monotonic() - t0)
        deadline = None if timeout is None else t0 + timeout

        def go():
            # the command gets what is left of the timeout once a channel is free
            left = None if deadline is None else max(0.1, deadline - time.monotonic())
            return conn.run(line, check=False, timeout=left, input=input, encoding="utf-8", errors="replace")

        try:
            r = await self._with_channel(go, deadline)
        except asyncssh.TimeoutError as e:
            self.journal.finish(entry, 124, "timed out")
            return Result(124, str(e.stdout or ""), f"timed out after {timeout:g} s", time.monotonic() - t0)
        except asyncio.TimeoutError:  # no channel freed up in time (asyncssh's own is above)
            msg = f"no SSH channel free within {timeout:g} s: {self.channel_note()}"
            self.journal.finish(entry, 124, msg)
            return Result(124, "", msg, time.monotonic() - t0)
        except (asyncssh.Error, OSError) as e:
            msg = f"{self.name}: {e}"
            self.journal.finish(entry, 255, msg)
            return Result(255, "", msg, time.monotonic() - t0)
        status = r.exit_status if r.exit_status is not None else 128 + 15 if r.exit_signal else 255
        # A failed command's own words stay in the journal (docker's error, not only its exit status)
        self.journal.finish(entry, status, _tail(str(r.stderr or "")) if status != 0 else None)
        return Result(status, str(r.stdout or ""), str(r.stderr or ""), time.monotonic() - t0)

    async def stream(self, cmd: str | Sequence[str]) -> AsyncIterator[str]:
        """Lines of a long-running command (stdout and stderr merged), without their line endings."""
        rest = ""
        # aclosing: closing this iterator must close the chunk reader at once, which stops the remote side
        async with contextlib.aclosing(self.stream_chunks(cmd)) as chunks:
            async for chunk in chunks:
                parts = (rest + chunk).split("\n") if rest else chunk.split("\n")
                rest = parts.pop()
                for part in parts:
                    yield part.rstrip("\r")
        if rest:
            yield rest.rstrip("\r")

    async def stream_chunks(self, cmd: str | Sequence[str], size: int = CHUNK) -> AsyncIterator[str]:
        """Output of a long-running command as it comes, up to `size` characters at a time (stdout
        and stderr merged). Reading a chunk costs about what reading one line does, so a flood
        moves at the wire's speed; and a consumer that stops pulling stops the remote side once
        the SSH window is full (back-pressure per stream).

        The remote command is stopped when the iterator is closed: a helper watches the channel's
        stdin and kills it on EOF, because without a PTY sshd would leave it running.
        """
        line = self._line(cmd)
        # The command runs in a session of its own (setsid, where the node has it) so that closing
        # the stream stops everything it started, background children included, not just the shell;
        # the wrapper passes a hangup or TERM of its own on to that session too.
        wrapped = (
            "exec 3<&0; if command -v setsid >/dev/null 2>&1; then "
            "setsid sh -c " + shlex.quote(line) + " </dev/null & else (" + line + ") </dev/null & fi; p=$!; "
            "k() { kill -TERM -$p 2>/dev/null || kill -TERM $p 2>/dev/null; }; "
            "trap 'k; exit 143' HUP INT TERM; "
            "{ cat <&3; k; } >/dev/null 2>&1 & exec 3<&-; "
            "wait $p; rc=$?; exit $rc"
        )
        entry = self.journal.start(self.name, line)
        conn = await self._ensure()
        status: int | None = None
        await self._slots.acquire()
        try:
            proc = None
            for attempt in range(OPEN_RETRIES):
                try:
                    proc = await conn.create_process(
                        sh("sh", "-c", wrapped), encoding="utf-8", errors="replace", stderr=asyncssh.STDOUT
                    )
                    break
                except asyncssh.ChannelOpenError:
                    self._slots.refused()
                    if attempt == OPEN_RETRIES - 1:
                        self.journal.finish(entry, 255, "the node refused a channel")
                        raise
                    await asyncio.sleep(min(0.05 * (attempt + 1), 0.5))
            try:
                read = proc.stdout.read
                while True:
                    chunk = await read(size)
                    if not chunk:
                        break
                    yield chunk
                await proc.wait_closed()
                status = proc.exit_status
            finally:
                if status is None:
                    with contextlib.suppress(Exception):
                        proc.stdin.write_eof()
                    proc.close()
                self.journal.finish(entry, status, None if status is not None else "stopped")
        finally:
            await self._slots.release()

    async def session(self, cmd: str | Sequence[str], slot_timeout: float | None = None) -> "Session":
        """Start `cmd` to be spoken to line by line for as long as the caller keeps it (a `Session`); it
        holds one channel slot until closed. Raises SshError, or asyncio.TimeoutError when no slot frees up."""
        line = self._line(cmd)
        conn = await self._ensure()
        await self._slots.acquire(slot_timeout)
        entry = self.journal.start(self.name, line)
        try:
            proc = await conn.create_process(line, encoding="utf-8", errors="replace")
        except (asyncssh.Error, OSError) as e:
            self.journal.finish(entry, 255, f"{self.name}: {e}")
            await self._slots.release()
            raise SshError(f"{self.name}: {e}") from None
        return Session(self, proc, entry)

    @contextlib.asynccontextmanager
    async def held(self, cmd: str | Sequence[str]) -> AsyncIterator[None]:
        """Run `cmd` with its stdin held open while the block runs. Leaving the block sends EOF, and so
        does the end of this process or of the connection (the node's sshd closes the pipe): a watchdog
        on the node that waits for EOF acts however sparktui ends, kill -9 included."""
        line = self._line(cmd)
        entry = self.journal.start(self.name, line)
        conn = await self._ensure()
        await self._slots.acquire()  # the channel stays open: it holds a slot as a stream does
        try:
            try:
                proc = await conn.create_process(line, encoding="utf-8", errors="replace")
            except (asyncssh.Error, OSError) as e:
                self.journal.finish(entry, 255, f"{self.name}: {e}")
                raise
            try:
                yield
            finally:
                with contextlib.suppress(Exception):
                    proc.stdin.write_eof()
                with contextlib.suppress(Exception):  # the watchdog's own work is done when it exits
                    await asyncio.wait_for(asyncio.shield(proc.wait_closed()), 30)
                proc.close()
                self.journal.finish(entry, proc.exit_status)
        finally:
            await self._slots.release()

    async def open_tcp(self, remote_port: int, remote_host: str = "127.0.0.1"):
        """(reader, writer) to remote_host:remote_port as seen from the node, over this connection.

        A direct-tcpip channel: no process on the node and no listening port on this machine, so a
        poll every few seconds (the serving metrics) costs one channel, not a command."""
        conn = await self._ensure()
        return await conn.open_connection(remote_host, remote_port)

    async def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """Forward a free local port on 127.0.0.1 to remote_host:remote_port as seen from the node."""
        conn = await self._ensure()
        entry = self.journal.start(self.name, f"# forward 127.0.0.1:<local> -> {remote_host}:{remote_port}")
        listener = await conn.forward_local_port("127.0.0.1", 0, remote_host, remote_port)
        self.journal.finish(entry, 0)
        return listener.get_port()


class Session:
    """A remote command spoken to a request at a time (Node.session): a line written, its answer read. Closing
    it sends EOF, which ends a remote loop that reads its stdin; so does a dropped connection."""

    def __init__(self, node: Node, proc, entry) -> None:
        self._node = node
        self._proc = proc
        self._entry = entry
        self.closed = False

    def send(self, line: str) -> None:
        self._proc.stdin.write(line + "\n")

    def end_input(self) -> None:
        """EOF on the command's stdin (what it was fed is complete); its output can still be read."""
        with contextlib.suppress(Exception):
            self._proc.stdin.write_eof()

    @property
    def exit_status(self) -> int | None:
        return self._proc.exit_status

    async def readuntil(self, marker: str) -> str:
        """Everything up to and with `marker`; without it (what came before) once the command ended or the
        link dropped."""
        try:
            return await self._proc.stdout.readuntil(marker)
        except asyncio.IncompleteReadError as e:
            return str(e.partial or "")
        except (asyncssh.Error, OSError):
            return ""

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            with contextlib.suppress(Exception):
                self._proc.stdin.write_eof()
            with contextlib.suppress(Exception):  # a loop on its stdin ends at EOF: let it exit on its own
                await asyncio.wait_for(asyncio.shield(self._proc.wait_closed()), 5)
            self._proc.close()
            self._node.journal.finish(self._entry, self._proc.exit_status)
        finally:
            await self._node._slots.release()


class Cluster:
    """All nodes of a config, connected concurrently."""

    def __init__(self, config: Config, journal: Journal | None = None, on_change: Callable[[Node], None] | None = None):
        self.config = config
        self.journal = journal or Journal()
        if self.journal.cluster is None:  # every command these links run belongs to this cluster
            self.journal.cluster = config.cluster
        self.nodes: dict[str, Node] = {n.name: Node(n, config.ssh, self.journal, on_change) for n in config.nodes}

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    def __iter__(self):
        return iter(self.nodes.values())

    async def connect_all(self) -> dict[str, str | None]:
        """Connect to every node at once; returns node -> error (None when connected)."""

        async def one(node: Node) -> None:
            with contextlib.suppress(SshError):
                await node.connect()

        await asyncio.gather(*(one(n) for n in self.nodes.values()))
        return {name: n.error for name, n in self.nodes.items()}

    async def close(self) -> None:
        await asyncio.gather(*(n.close() for n in self.nodes.values()), return_exceptions=True)

    async def __aenter__(self) -> "Cluster":
        await self.connect_all()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
