"""HTTP/1.1 framing on asyncio streams: bodies in, JSON/text answers and chunked server-sent events out."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        data = b""
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return data
            data += await reader.readexactly(size)
            await reader.readline()
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length > 0 else b""


async def respond(
    w: asyncio.StreamWriter, code: int, body: bytes | dict, keep: bool = True, ctype: str | None = None
) -> None:
    if isinstance(body, dict):
        payload, kind = json.dumps(body).encode(), "application/json"
    else:
        payload, kind = body, "application/json" if body else "text/plain; charset=utf-8"
    head = (
        f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\ncontent-type: {ctype or kind}\r\n"
        f"content-length: {len(payload)}\r\nconnection: {'keep-alive' if keep else 'close'}\r\n\r\n"
    )
    w.write(head.encode() + payload)
    await w.drain()


async def start_stream(w: asyncio.StreamWriter, keep: bool) -> None:
    w.write(
        (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            f"transfer-encoding: chunked\r\ncache-control: no-cache\r\nconnection: {'keep-alive' if keep else 'close'}"
            "\r\n\r\n"
        ).encode()
    )
    await w.drain()


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def sse(w: asyncio.StreamWriter, obj: dict | str) -> None:
    """One `data: ...` event (a JSON object, or a bare word such as [DONE]) in its own chunk."""
    data = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
    w.write(chunked(b"data: " + data + b"\n\n"))
    await w.drain()


async def end_stream(w: asyncio.StreamWriter) -> None:
    w.write(b"0\r\n\r\n")
    await w.drain()
