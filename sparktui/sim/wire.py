"""Newline-delimited JSON over asyncio streams, and connecting with bounded retries."""

from __future__ import annotations

import asyncio
import json
import time

from . import netinfo

MAX_LINE = 1 << 20
RETRY_GAP_S = 0.25  # wall seconds between connection attempts: keeps a "hung" rank near 0 % CPU


async def send(writer: asyncio.StreamWriter, obj: dict) -> None:
    writer.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    await writer.drain()


async def recv(reader: asyncio.StreamReader) -> dict | None:
    """Next message, or None at end of stream (or on garbage, which ends the conversation)."""
    try:
        line = await reader.readline()
    except (ConnectionError, asyncio.LimitOverrunError, ValueError):
        return None
    if not line:
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


async def open_once(host: str, port: int, timeout: float = 3.0):
    """One connection attempt, bound to the simulated source address when interfaces are simulated."""
    source = netinfo.source_for(host)
    kwargs = {"local_addr": (source, 0)} if source else {}
    return await asyncio.wait_for(asyncio.open_connection(host, port, limit=MAX_LINE, **kwargs), timeout)


async def connect_retrying(host: str, port: int, deadline: float | None):
    """Connect, retrying every RETRY_GAP_S until `deadline` (time.monotonic()); TimeoutError after it.
    Without a deadline the caller must bound the wait (a watchdog cancels it)."""
    while True:
        try:
            return await open_once(host, port, timeout=_left(deadline, 3.0))
        except (OSError, asyncio.TimeoutError):
            pass
        if deadline is not None and time.monotonic() + RETRY_GAP_S >= deadline:
            raise TimeoutError(f"could not connect to {host}:{port}")
        await asyncio.sleep(RETRY_GAP_S)


def _left(deadline: float | None, cap: float) -> float:
    if deadline is None:
        return cap
    return max(0.05, min(cap, deadline - time.monotonic()))


def close(writer: asyncio.StreamWriter | None) -> None:
    if writer is not None:
        try:
            writer.close()
        except Exception:
            pass
