"""A tiny Ray GCS: the head keeps the node table; raylets register and hold their connection open.

Each node entry carries the node's IP, its resources (1 GPU by default) and the port of a listener
on the node's own --node-ip-address that stands for its NCCL endpoint: a driver that places work on
a node connects there for real, so a node registered under an unreachable address hangs the driver.
Placement-group reservations live as long as the driver's connection.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time

from . import clock, collective, gpu, netinfo, wire

CLUSTER_FILE = "ray_current_cluster"


def ray_dir() -> str:
    """Ray's temp root: {tempfile.gettempdir()}/ray (honours TMPDIR like Ray does)."""
    import tempfile

    return os.path.join(tempfile.gettempdir(), "ray")


def current_cluster_path() -> str:
    return os.path.join(ray_dir(), CLUSTER_FILE)


def read_current_cluster() -> str | None:
    try:
        with open(current_cluster_path(), encoding="utf-8") as f:
            addr = f.read().strip()
        return addr or None
    except OSError:
        return None


def split_address(addr: str, default_port: int = 6379) -> tuple[str, int]:
    addr = addr.strip()
    for prefix in ("ray://", "http://", "https://"):
        if addr.startswith(prefix):
            addr = addr[len(prefix) :]
    host, sep, port = addr.rpartition(":")
    if not sep:
        return addr, default_port
    return host.strip("[]"), int(port)


def node_resources(num_gpus: int | None, num_cpus: int | None) -> dict:
    mem = _mem_available()
    return {
        "CPU": float(num_cpus if num_cpus is not None else (os.cpu_count() or 1)),
        "GPU": float(num_gpus if num_gpus is not None else gpu.gpus_per_node()),
        "memory": float(int(mem * 0.7)),
        "object_store_memory": float(int(mem * 0.3)),
    }


def _mem_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 16 * 1024**3


# What a raylet's own environment says about its node's sockets: the driver needs it to tell which
# interface a Ray worker on that node ends up with (its own, or the driver's when vLLM copies it over).
NODE_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "UCX_NET_DEVICES", "NCCL_IB_HCA")


def new_node(ip: str, resources: dict, nccl_port: int, is_head: bool) -> dict:
    from . import netinfo

    return {
        "node_id": secrets.token_hex(28),
        "ip": ip,
        "hostname": socket.gethostname(),
        "resources": resources,
        "nccl_port": nccl_port,
        "is_head": is_head,
        "started": time.time(),
        "ifaces": [i.name for i in netinfo.interfaces()],
        "env": {k: os.environ[k] for k in NODE_ENV if k in os.environ},
    }


# The GCS health-checks every raylet (src/ray/common/ray_config_def.h, Ray 2.x: health_check_initial_delay_ms
# 5000, health_check_period_ms 3000, health_check_timeout_ms 10000, health_check_failure_threshold 5), so a
# frozen node (a paused container: its connection stays up, nothing answers) is marked dead after ~1 minute.
HEALTH_INITIAL_DELAY_S = 5.0
HEALTH_PERIOD_S = 3.0
HEALTH_TIMEOUT_S = 10.0
HEALTH_FAILURES = 5


def node_dead_message(node: dict) -> str:
    """What the GCS publishes to drivers (src/ray/gcs/gcs_server/gcs_node_manager.cc, RemoveNode)."""
    ip = node.get("ip", "")
    return (
        f"The node with node id: {node.get('node_id')} and address: {ip} and node name: {ip} has been marked "
        "dead because the detector has missed too many heartbeats from it. This can happen when a \t(1) raylet "
        "crashes unexpectedly (OOM, etc.) \n\t(2) raylet has lagging heartbeats due to slow network or busy "
        "workload."
    )


class GcsServer:
    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.reservations: dict[int, dict[str, float]] = {}
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, host: str, port: int) -> None:
        netinfo.check_bindable(host)
        self._server = await asyncio.start_server(self._serve, host, port, limit=wire.MAX_LINE, reuse_address=True)

    def add_local(self, node: dict) -> None:
        self.nodes[node["node_id"]] = node

    def used(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for res in self.reservations.values():
            for node_id, n in res.items():
                out[node_id] = out.get(node_id, 0.0) + n
        return out

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = id(writer)
        registered: str | None = None
        healthy: asyncio.Event | None = None
        checker: asyncio.Future | None = None
        self._writers.add(writer)
        try:
            while True:
                msg = await wire.recv(reader)
                if msg is None:
                    break
                op = msg.get("op")
                if op == "register" and isinstance(msg.get("node"), dict):
                    node = msg["node"]
                    registered = node["node_id"]
                    self.nodes[registered] = node
                    await wire.send(writer, {"op": "registered", "node_id": registered})
                    healthy = asyncio.Event()
                    checker = asyncio.ensure_future(self._health_check(node, writer, healthy))
                elif op == "healthy" and healthy is not None:
                    healthy.set()
                elif op == "nodes":
                    await wire.send(writer, {"op": "nodes", "nodes": list(self.nodes.values()), "used": self.used()})
                elif op == "reserve":
                    await wire.send(writer, {"op": "reserved", "ok": self._reserve(key, msg.get("bundles") or [])})
                elif op == "release":
                    self.reservations.pop(key, None)
                    await wire.send(writer, {"op": "released"})
                else:
                    await wire.send(writer, {"op": "error", "error": f"unknown op {op!r}"})
        except (ConnectionError, OSError):
            pass
        finally:
            if checker is not None:
                checker.cancel()
            self._writers.discard(writer)
            self.reservations.pop(key, None)
            if registered is not None:
                self.nodes.pop(registered, None)  # the raylet went away: the node is dead
            wire.close(writer)

    async def _health_check(self, node: dict, writer: asyncio.StreamWriter, healthy: asyncio.Event) -> None:
        """Ping the raylet on its registration link; after HEALTH_FAILURES misses in a row the node is dead:
        gone from the cluster, and every driver is told."""
        await clock.pause(HEALTH_INITIAL_DELAY_S)
        failures = 0
        while failures < HEALTH_FAILURES:
            healthy.clear()
            try:
                await wire.send(writer, {"op": "health"})
                await asyncio.wait_for(healthy.wait(), clock.scaled(HEALTH_TIMEOUT_S))
                failures = 0
            except (asyncio.TimeoutError, ConnectionError, OSError):
                failures += 1
            await clock.pause(HEALTH_PERIOD_S)
        self.nodes.pop(node["node_id"], None)
        push = {"op": "node_dead", "node_id": node["node_id"], "ip": node.get("ip"), "message": node_dead_message(node)}
        for w in list(self._writers):
            if w is not writer:
                try:
                    await wire.send(w, push)
                except (ConnectionError, OSError):
                    pass

    def _reserve(self, key: int, bundles: list) -> bool:
        want: dict[str, float] = {}
        for node_id in bundles:
            want[node_id] = want.get(node_id, 0.0) + 1.0
        used = self.used()
        for node_id, n in want.items():
            node = self.nodes.get(node_id)
            if node is None or node["resources"].get("GPU", 0) - used.get(node_id, 0.0) < n:
                return False
        self.reservations[key] = want
        return True

    async def close(self) -> None:
        for w in list(self._writers):
            wire.close(w)
        if self._server is not None:
            self._server.close()


PUSHED = ("node_dead",)  # what the GCS publishes unasked on any connection


class GcsClient:
    """One connection to the GCS; requests are answered in order."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()

    async def connect(self, host: str, port: int, deadline: float | None) -> None:
        self.reader, self.writer = await wire.connect_retrying(host, port, deadline)

    async def request(self, obj: dict) -> dict:
        assert self.reader is not None and self.writer is not None
        async with self._lock:
            await wire.send(self.writer, obj)
            reply = await wire.recv(self.reader)
            while reply is not None and reply.get("op") in PUSHED:  # published, not an answer
                reply = await wire.recv(self.reader)
        if reply is None:
            raise ConnectionError("GCS connection closed")
        return reply

    async def wait_closed(self, on_push=None) -> None:
        """Returns when the GCS side goes away (use on a connection that only registered, or a driver's once
        placed): answers the GCS's health checks, hands what it publishes to `on_push`."""
        assert self.reader is not None and self.writer is not None
        while (msg := await wire.recv(self.reader)) is not None:
            if msg.get("op") == "health":
                try:
                    await wire.send(self.writer, {"op": "healthy"})
                except (ConnectionError, OSError):
                    return
            elif msg.get("op") in PUSHED and on_push is not None:
                on_push(msg)

    def close(self) -> None:
        wire.close(self.writer)


class NcclEndpoint:
    """A node's stand-in NCCL listener: accepts drivers' links and holds them open."""

    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, host: str) -> None:
        netinfo.check_bindable(host)
        self._server = await asyncio.start_server(self._serve, host, 0, limit=wire.MAX_LINE)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            msg = await wire.recv(reader)
            if msg and msg.get("op") == "hello":
                await wire.send(writer, {"op": "welcome"})
                await collective.answer_steps(reader, writer)  # the driver's per-step all-reduce
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            wire.close(writer)

    async def close(self) -> None:
        for w in list(self._writers):
            wire.close(w)
        if self._server is not None:
            self._server.close()
