"""The cross-node message queue: each node listens, publishes an address, and every peer connects.

The listener binds only the node's address on the rendezvous network (the path the engines'
traffic must take), so a published address on any other network is refused and the ranks wait
there forever, as the real ones do when the queue's address is unreachable.
"""

from __future__ import annotations

import asyncio

from . import collective, netinfo, wire


class QueueEndpoint:
    """This node's end: accepts one connection per peer rank."""

    def __init__(self, rank: int, expected_peers: set[int]) -> None:
        self.rank = rank
        self.expected = set(expected_peers)
        self.inbound: set[int] = set()
        self.all_inbound = asyncio.Event()
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._writers: list[asyncio.StreamWriter] = []
        if not self.expected:
            self.all_inbound.set()

    async def start(self, bind_host: str) -> None:
        netinfo.check_bindable(bind_host)
        self._server = await asyncio.start_server(self._serve, bind_host, 0, limit=wire.MAX_LINE)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        msg = await wire.recv(reader)
        if not msg or msg.get("op") != "hello":
            wire.close(writer)
            return
        self._writers.append(writer)
        self.inbound.add(int(msg.get("rank", -1)))
        await wire.send(writer, {"op": "welcome", "rank": self.rank})
        if self.expected <= self.inbound:
            self.all_inbound.set()
        await collective.answer_steps(reader, writer)  # the head's per-step all-reduce, until a side goes away

    async def close(self) -> None:
        for w in self._writers:
            wire.close(w)
        if self._server is not None:
            self._server.close()


async def link_to(host: str, port: int, my_rank: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to a peer's published queue address; retries until cancelled (a watchdog bounds it)."""
    while True:
        reader, writer = await wire.connect_retrying(host, port, deadline=None)
        await wire.send(writer, {"op": "hello", "rank": my_rank})
        reply = await wire.recv(reader)
        if reply and reply.get("op") == "welcome":
            return reader, writer
        wire.close(writer)
        await asyncio.sleep(wire.RETRY_GAP_S)


async def join_mesh(
    endpoint: QueueEndpoint, peers: dict[int, tuple[str, int]]
) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """Connect to every peer and wait for every peer to connect back; returns this node's links to them
    (the head carries its per-step all-reduce on them)."""
    links = await asyncio.gather(*(link_to(h, p, endpoint.rank) for h, p in peers.values()))
    await endpoint.all_inbound.wait()
    return list(links)
