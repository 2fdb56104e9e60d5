"""The distributed-init rendezvous: rank 0 listens at the init address, other ranks connect.

Plays torch's TCPStore: ranks exchange what they publish (host IP, queue port), then meet at named
barriers. The connections stay open afterwards and stand for the NCCL communicator: when one
closes, the peer is gone and the surviving ranks fail the way a broken collective does.
"""

from __future__ import annotations

import asyncio
import time

from . import netinfo, wire


class StoreError(Exception):
    """The rendezvous failed (torch raises DistStoreError / DistNetworkError)."""


class _Group:
    """Shared state of both sides: who published what, barrier releases, loss of a peer."""

    def __init__(self, world: int) -> None:
        self.world = world
        self.members: dict[int, dict] = {}
        self.complete = asyncio.Event()
        self.lost = asyncio.Event()
        self.lost_rank: int | None = None
        self.released: dict[str, asyncio.Event] = {}

    def release_event(self, name: str) -> asyncio.Event:
        return self.released.setdefault(name, asyncio.Event())


class StoreServer(_Group):
    """Rank 0's side."""

    def __init__(self, world: int) -> None:
        super().__init__(world)
        self._server: asyncio.AbstractServer | None = None
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._arrived: dict[str, set[int]] = {}
        self.local_address = ""

    async def start(self, host: str, port: int) -> None:
        """Bind exactly host:port (OSError as the kernel says when it cannot)."""
        netinfo.check_bindable(host)
        self._server = await asyncio.start_server(self._serve, host, port, limit=wire.MAX_LINE, reuse_address=True)
        self.local_address = host

    async def publish(self, info: dict) -> None:
        """Rank 0's own info; the world is complete once it and every other rank are in."""
        self.members[0] = info
        await self._maybe_complete()

    async def _maybe_complete(self) -> None:
        if len(self.members) == self.world and 0 in self.members and not self.complete.is_set():
            self.complete.set()
            for w in list(self._writers.values()):
                try:
                    await wire.send(w, {"op": "world", "members": {str(k): v for k, v in self.members.items()}})
                except (ConnectionError, OSError):
                    pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rank = None
        try:
            msg = await wire.recv(reader)
            if not msg or msg.get("op") != "join" or not isinstance(msg.get("rank"), int):
                return
            rank = msg["rank"]
            if rank in self.members or not 0 < rank < self.world:
                await wire.send(writer, {"op": "error", "error": f"rank {rank} already joined or out of range"})
                return
            self.members[rank] = msg.get("info") or {}
            self._writers[rank] = writer
            await self._maybe_complete()
            while True:
                msg = await wire.recv(reader)
                if msg is None:
                    break
                if msg.get("op") == "barrier":
                    await self._arrive(str(msg.get("name")), rank)
        except (ConnectionError, OSError):
            pass
        finally:
            if rank is not None and self._writers.get(rank) is writer:
                self._writers.pop(rank, None)
                if self.complete.is_set():
                    self.lost_rank = rank
                    self.lost.set()
                else:
                    self.members.pop(rank, None)  # left before everyone arrived: it may join again
            wire.close(writer)

    async def _arrive(self, name: str, rank: int) -> None:
        arrived = self._arrived.setdefault(name, set())
        arrived.add(rank)
        if len(arrived) == self.world:
            for w in list(self._writers.values()):
                try:
                    await wire.send(w, {"op": "release", "name": name})
                except (ConnectionError, OSError):
                    pass
            self.release_event(name).set()

    async def barrier(self, name: str) -> None:
        await self._arrive(name, 0)
        await self.release_event(name).wait()

    def joined(self) -> int:
        """Ranks that connected, counting rank 0 itself (torch's "N/M clients joined")."""
        return len(self.members)

    async def close(self) -> None:
        for w in list(self._writers.values()):
            wire.close(w)
        if self._server is not None:
            self._server.close()


class StoreClient(_Group):
    """Any other rank's side."""

    def __init__(self, world: int, rank: int) -> None:
        super().__init__(world)
        self.rank = rank
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self.local_address = ""

    async def connect(self, host: str, port: int, deadline: float | None) -> None:
        """Retry until `deadline`; StoreError when it passes."""
        try:
            reader, writer = await wire.connect_retrying(host, port, deadline)
        except TimeoutError as e:
            raise StoreError(str(e)) from None
        self._writer = writer
        self.local_address = writer.get_extra_info("sockname")[0]
        self._reader_task = asyncio.ensure_future(self._read(reader))

    async def join(self, info: dict) -> None:
        """Publish this rank's info; the world arrives when every rank has joined."""
        assert self._writer is not None
        await wire.send(self._writer, {"op": "join", "rank": self.rank, "info": info})

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            msg = await wire.recv(reader)
            if msg is None:
                break
            op = msg.get("op")
            if op == "world":
                self.members = {int(k): v for k, v in (msg.get("members") or {}).items()}
                self.complete.set()
            elif op == "release":
                self.release_event(str(msg.get("name"))).set()
            elif op == "error":
                break
        self.lost_rank = 0
        self.lost.set()

    async def barrier(self, name: str) -> None:
        assert self._writer is not None
        await wire.send(self._writer, {"op": "barrier", "name": name})
        await self.release_event(name).wait()

    async def close(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        wire.close(self._writer)


async def wait_complete(group: _Group, deadline: float | None) -> None:
    """Wait until every rank joined; StoreError after `deadline` or if rank 0 goes away first."""
    waiters = [asyncio.ensure_future(group.complete.wait()), asyncio.ensure_future(group.lost.wait())]
    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
    if not group.complete.is_set():
        raise StoreError("rendezvous incomplete")
