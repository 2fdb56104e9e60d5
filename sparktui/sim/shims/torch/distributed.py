"""torch.distributed's process group over "tcp://host:port", as the preflight uses it: rank 0 listens, the
others connect; all_reduce sums over those connections, then waits out what the simulated fabric needs for
the tensor's bytes (nccl-tests' bus bandwidth: busbw = bytes / time * 2 (n-1) / n)."""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from sparktui.sim import netinfo, nccl_lines, timing

_G: dict = {}


def _line(sock) -> dict:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError("NCCL error: remote process exited or there was a network error")
        buf += chunk
    return json.loads(buf)


def _send(sock, obj) -> None:
    sock.sendall((json.dumps(obj) + "\n").encode())


def init_process_group(backend="nccl", init_method="", world_size=1, rank=0, timeout=None, device_id=None):
    host, _, port = init_method.rpartition("//")[2].rpartition(":")
    host, port = host.strip("[]"), int(port)
    limit = time.monotonic() + (timeout.total_seconds() if timeout else 600)
    peers = []
    if rank == 0:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, port))
        srv.listen(world_size)
        while len(peers) < world_size - 1:
            srv.settimeout(max(0.05, limit - time.monotonic()))
            try:
                peers.append(srv.accept()[0])
            except socket.timeout:
                raise RuntimeError(f"DistStoreError: Timed out waiting for {world_size} ranks") from None
        srv.close()
    else:
        while True:
            try:
                peers.append(socket.create_connection((host, port), timeout=2))
                break
            except OSError:
                if time.monotonic() > limit:
                    raise RuntimeError(f"DistNetworkError: cannot reach {host}:{port}") from None
                time.sleep(0.1)  # torch's TCPStore client retries the same way until its timeout
    for s in peers:
        s.settimeout(None)
    path = timing.fabric_path(world_size)
    _G.update(rank=rank, world=world_size, peers=peers, path=path)
    if nccl_lines.debug_on():
        iface = os.environ.get("NCCL_SOCKET_IFNAME", "").lstrip("=^").split(",")[0]
        ip = next((i.address for i in netinfo.interfaces() if i.name == iface), host)
        lines = nccl_lines.init_lines(path, iface, ip) + nccl_lines.channel_lines(path, rank, world_size)
        sys.stderr.write("".join(ln + "\n" for ln in lines))
        sys.stderr.flush()


def _exchange(value: float) -> float:
    if _G["rank"] == 0:
        total = value + sum(_line(s)["v"] for s in _G["peers"])
        for s in _G["peers"]:
            _send(s, {"v": total})
        return total
    _send(_G["peers"][0], {"v": value})
    return _line(_G["peers"][0])["v"]


def all_reduce(t) -> None:
    t0, world = time.monotonic(), _G["world"]
    t.value = _exchange(t.value)
    bw = timing.busbw_gbps(_G["path"]) if world > 1 else None
    if bw:
        need = t.n * 4 * 2.0 * (world - 1) / world / (bw * 1e9 / 8)
        # Back-to-back collectives queue on the GPU's stream and the host only waits at synchronize, so a run
        # of them takes the sum of their wire times: what this host's exchange and sleep overran in one call
        # of a run is taken off the next (never carried in from before the run, so it cannot add speed).
        end = _G.get("end")
        chained = end is not None and t0 - end < 0.002
        due = t0 + need - (_G.get("late", 0.0) if chained and _G.get("chained") else 0.0)
        time.sleep(max(0.0, due - time.monotonic()))
        _G["end"] = time.monotonic()
        _G["late"], _G["chained"] = max(0.0, _G["end"] - due), chained


def barrier() -> None:
    _exchange(0.0)


def destroy_process_group() -> None:
    for s in _G.pop("peers", []):
        s.close()
