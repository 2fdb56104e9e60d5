"""The engines' HTTP endpoints on asyncio streams: health, models, chat completions (plain and SSE).

One EngineState is shared with the engine, which flips `status` and reads the counters for its
periodic log lines. Keep-alive and chunked responses follow HTTP/1.1 so ordinary clients just work.
"""
from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from http import HTTPStatus
from typing import Awaitable, Callable

from . import clock, textgen

DECODE_TOK_S = 20.0  # engine-time decode speed, what two Sparks manage on a 122B MoE over RoCE
PREFILL_TOK_S = 2500.0


class EngineState:
    """What the HTTP side needs to know about the engine, and the traffic counters it keeps."""

    def __init__(self, kind: str, served_name: str, model_path: str, max_model_len: int,
                 version: str, server_info: dict | None = None, api_key: str | None = None) -> None:
        self.kind = kind  # "sglang" | "vllm"
        self.api_key = api_key  # --api-key: requests must carry "Authorization: Bearer KEY"
        self.served_name = served_name
        self.model_path = model_path
        self.max_model_len = max_model_len
        self.version = version
        self.server_info = server_info or {}
        self.status = "starting"  # starting | ready | dead
        self.created = int(time.time())
        self.running = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.requests = 0
        self.on_prefill: Callable[[int, int], None] | None = None  # (new tokens, running) -> log
        self.on_decode: Callable[[int, int], None] | None = None  # (tokens so far, running) -> log


async def generate(state: EngineState, prompt_tokens: int, text: str, max_tokens: int | None,
                   emit: Callable[[str], Awaitable[None]] | None = None) -> tuple[str, str, int]:
    """Produce the answer piece by piece at decode speed; returns (text, finish_reason, tokens)."""
    parts = textgen.pieces(text)
    finish = "stop"
    if max_tokens is not None and max_tokens < len(parts):
        parts, finish = parts[:max(0, max_tokens)], "length"
    state.requests += 1
    state.running += 1
    state.prompt_tokens += prompt_tokens
    try:
        if state.on_prefill:
            state.on_prefill(prompt_tokens, state.running)
        await clock.pause(0.05 + prompt_tokens / PREFILL_TOK_S)
        out = []
        for i, part in enumerate(parts, 1):
            await clock.pause(1.0 / DECODE_TOK_S)
            if state.status == "dead":
                raise EngineDead()
            out.append(part)
            state.generation_tokens += 1
            if emit is not None:
                await emit(part)
            if state.on_decode and i % 40 == 0:
                state.on_decode(prompt_tokens + i, state.running)
        return "".join(out), finish, len(parts)
    finally:
        state.running -= 1


class EngineDead(Exception):
    pass


def _last_user_text(messages: list) -> str:
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
            return str(content or "")
    return ""


def _prompt_tokens(messages: list) -> int:
    total = 0
    for m in messages:
        if isinstance(m, dict):
            content = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            total += textgen.count_tokens(text or "") + 4  # role markers of the chat template
    return total + 3


class ApiServer:
    """Serves EngineState over HTTP; `access` logs one line per request like uvicorn does."""

    def __init__(self, state: EngineState, access: Callable[[str, str], None]) -> None:
        self.state = state
        self.access = access
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Future] = set()  # one per open connection, cancelled on close

    async def start(self, host: str = "", port: int = 0, sock: socket.socket | None = None) -> None:
        if sock is not None:
            self._server = await asyncio.start_server(self._handle, sock=sock)
        else:
            self._server = await asyncio.start_server(self._handle, host, port, reuse_address=True)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.cancel()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        if me is not None:
            self._conns.add(me)
        peer = writer.get_extra_info("peername") or ("-", 0)
        client = f"{peer[0]}:{peer[1]}"
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                parts = line.decode("latin-1").split()
                if len(parts) != 3:
                    await _respond(writer, 400, {"detail": "Bad Request"}, keep=False)
                    break
                method, target, version = parts
                headers: dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await _read_body(reader, headers)
                keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
                status = await self._route(method, target.split("?")[0], body, writer, keep,
                                           headers.get("authorization", ""))
                self.access(client, f'"{method} {target} {version}" {status} {HTTPStatus(status).phrase}')
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            if me is not None:
                self._conns.discard(me)
            try:
                writer.close()
            except Exception:
                pass

    def _guarded(self, method: str, path: str) -> bool:
        """Does this request need the API key? As upstream: SGLang guards all but /health* and /metrics,
        vLLM only the /v1 routes; CORS preflights (OPTIONS) pass in both."""
        if not self.state.api_key or method == "OPTIONS":
            return False
        if self.state.kind == "vllm":
            return path.startswith("/v1")
        return not path.startswith(("/health", "/metrics"))

    async def _route(self, method: str, path: str, body: bytes, w: asyncio.StreamWriter, keep: bool,
                     auth: str = "") -> int:
        st = self.state
        if self._guarded(method, path) and auth != f"Bearer {st.api_key}":
            await _respond(w, 401, {"error": "Unauthorized"}, keep=keep)
            return 401
        if path == "/health" and method in ("GET", "HEAD"):
            code = 200 if st.status == "ready" or (st.kind == "vllm" and st.status != "dead") else 503
            await _respond(w, code, b"", keep=keep)
            return code
        if path == "/health_generate" and method == "GET" and st.kind == "sglang":
            if st.status != "ready":
                await _respond(w, 503, b"", keep=keep)
                return 503
            try:
                await generate(st, 4, "ok", 1)
            except EngineDead:
                await _respond(w, 503, b"", keep=keep)
                return 503
            await _respond(w, 200, b"", keep=keep)
            return 200
        if path == "/version" and method == "GET":
            await _respond(w, 200, {"version": st.version}, keep=keep)
            return 200
        if path == "/v1/models" and method == "GET":
            card = {"id": st.served_name, "object": "model", "created": st.created, "owned_by": st.kind,
                    "root": st.model_path if st.kind == "vllm" else st.served_name, "parent": None,
                    "max_model_len": st.max_model_len}
            await _respond(w, 200, {"object": "list", "data": [card]}, keep=keep)
            return 200
        if st.kind == "sglang" and path in ("/get_model_info", "/model_info") and method == "GET":
            await _respond(w, 200, {"model_path": st.model_path, "tokenizer_path": st.model_path,
                                    "is_generation": True}, keep=keep)
            return 200
        if st.kind == "sglang" and path in ("/get_server_info", "/server_info") and method == "GET":
            await _respond(w, 200, dict(st.server_info, version=st.version), keep=keep)
            return 200
        if path == "/v1/chat/completions" and method == "POST":
            return await self._chat(body, w, keep)
        if path == "/v1/completions" and method == "POST":
            return await self._completion(body, w, keep)
        if path == "/generate" and method == "POST" and st.kind == "sglang":
            return await self._native_generate(body, w, keep)
        known = {"/health", "/health_generate", "/version", "/v1/models", "/v1/chat/completions",
                 "/v1/completions", "/generate", "/get_model_info", "/model_info"}
        if path in known:
            await _respond(w, 405, {"detail": "Method Not Allowed"}, keep=keep)
            return 405
        await _respond(w, 404, {"detail": "Not Found"}, keep=keep)
        return 404

    def _error(self, code: int, message: str, param: str | None = None) -> dict:
        kind = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError",
                503: "ServiceUnavailableError"}.get(code, "Error")
        if self.state.kind == "vllm":
            return {"error": {"message": message, "type": kind, "param": param, "code": code}}
        return {"object": "error", "message": message, "type": kind, "param": param, "code": code}

    def _parse(self, body: bytes) -> dict | None:
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return None
        return req if isinstance(req, dict) else None

    async def _precheck(self, req: dict | None, w, keep: bool) -> int | None:
        st = self.state
        if req is None:
            await _respond(w, 400, self._error(400, "Invalid JSON in request body"), keep=keep)
            return 400
        if st.status == "dead":
            code = 500 if st.kind == "vllm" else 503
            msg = ("EngineCore encountered an issue. See stack trace (above) for the root cause."
                   if st.kind == "vllm" else "The server is not healthy: the scheduler is dead.")
            await _respond(w, code, self._error(code, msg), keep=keep)
            return code
        model = req.get("model")
        if st.kind == "vllm" and model not in (None, st.served_name):
            await _respond(w, 404, self._error(404, f"The model `{model}` does not exist.", "model"), keep=keep)
            return 404
        return None

    async def _chat(self, body: bytes, w: asyncio.StreamWriter, keep: bool) -> int:
        req = self._parse(body)
        code = await self._precheck(req, w, keep)
        if code is not None:
            return code
        assert req is not None
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages:
            await _respond(w, 400, self._error(400, "messages must be a non-empty list", "messages"), keep=keep)
            return 400
        prompt_tokens = _prompt_tokens(messages)
        max_tokens = req.get("max_completion_tokens", req.get("max_tokens"))
        max_tokens = max_tokens if isinstance(max_tokens, int) and max_tokens >= 0 else None
        if prompt_tokens >= self.state.max_model_len:
            msg = (f"This model's maximum context length is {self.state.max_model_len} tokens. However, your "
                   f"request has {prompt_tokens} input tokens. Please reduce the length of the input messages.")
            await _respond(w, 400, self._error(400, msg), keep=keep)
            return 400
        text = textgen.answer(_last_user_text(messages))
        rid = f"chatcmpl-{uuid.uuid4().hex[:32]}"
        created = int(time.time())
        name = self.state.served_name
        if not req.get("stream"):
            try:
                out, finish, n = await generate(self.state, prompt_tokens, text, max_tokens)
            except EngineDead:
                return await self._dead_midway(w, keep)
            await _respond(w, 200, {
                "id": rid, "object": "chat.completion", "created": created, "model": name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": out, "reasoning_content": None,
                                                     "tool_calls": []},
                             "logprobs": None, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                          "total_tokens": prompt_tokens + n}}, keep=keep)
            return 200
        include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
        await _start_stream(w, keep)

        def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> dict:
            obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": name,
                   "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            if usage is not None:
                obj["choices"] = []
                obj["usage"] = usage
            return obj

        await _sse(w, chunk({"role": "assistant", "content": ""}))

        async def emit(part: str) -> None:
            await _sse(w, chunk({"content": part}))

        try:
            _, finish, n = await generate(self.state, prompt_tokens, text, max_tokens, emit)
        except EngineDead:
            await _sse(w, {"error": self._error(500, "engine died")})
            await _end_stream(w)
            return 200
        await _sse(w, chunk({}, finish))
        if include_usage:
            await _sse(w, chunk({}, None, {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                           "total_tokens": prompt_tokens + n}))
        w.write(_chunked(b"data: [DONE]\n\n"))
        await _end_stream(w)
        return 200

    async def _completion(self, body: bytes, w: asyncio.StreamWriter, keep: bool) -> int:
        req = self._parse(body)
        code = await self._precheck(req, w, keep)
        if code is not None:
            return code
        assert req is not None
        prompt = req.get("prompt") or ""
        prompt = prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
        prompt_tokens = textgen.count_tokens(prompt)
        max_tokens = req.get("max_tokens") if isinstance(req.get("max_tokens"), int) else 16
        try:
            out, finish, n = await generate(self.state, prompt_tokens, " " + textgen.answer(prompt), max_tokens)
        except EngineDead:
            return await self._dead_midway(w, keep)
        await _respond(w, 200, {
            "id": f"cmpl-{uuid.uuid4().hex[:32]}", "object": "text_completion", "created": int(time.time()),
            "model": self.state.served_name,
            "choices": [{"index": 0, "text": out, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}},
            keep=keep)
        return 200

    async def _native_generate(self, body: bytes, w: asyncio.StreamWriter, keep: bool) -> int:
        req = self._parse(body)
        code = await self._precheck(req, w, keep)
        if code is not None:
            return code
        assert req is not None
        text_in = req.get("text") or ""
        text_in = text_in if isinstance(text_in, str) else " ".join(map(str, text_in))
        params = req.get("sampling_params") or {}
        max_new = params.get("max_new_tokens") if isinstance(params.get("max_new_tokens"), int) else 128
        prompt_tokens = textgen.count_tokens(text_in)
        try:
            out, finish, n = await generate(self.state, prompt_tokens, textgen.answer(text_in), max_new)
        except EngineDead:
            return await self._dead_midway(w, keep)
        await _respond(w, 200, {"text": out, "meta_info": {
            "id": uuid.uuid4().hex, "prompt_tokens": prompt_tokens, "completion_tokens": n,
            "cached_tokens": 0, "finish_reason": {"type": finish}}}, keep=keep)
        return 200

    async def _dead_midway(self, w: asyncio.StreamWriter, keep: bool) -> int:
        code = 500
        await _respond(w, code, self._error(code, "EngineCore encountered an issue. See stack trace (above) "
                                                  "for the root cause."), keep=keep)
        return code


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
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


async def _respond(w: asyncio.StreamWriter, code: int, body: bytes | dict, keep: bool = True) -> None:
    if isinstance(body, dict):
        payload, ctype = json.dumps(body).encode(), "application/json"
    else:
        payload, ctype = body, "application/json" if body else "text/plain; charset=utf-8"
    head = (f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\ncontent-type: {ctype}\r\n"
            f"content-length: {len(payload)}\r\nconnection: {'keep-alive' if keep else 'close'}\r\n\r\n")
    w.write(head.encode() + payload)
    await w.drain()


async def _start_stream(w: asyncio.StreamWriter, keep: bool) -> None:
    w.write(("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
             f"transfer-encoding: chunked\r\ncache-control: no-cache\r\nconnection: {'keep-alive' if keep else 'close'}"
             "\r\n\r\n").encode())
    await w.drain()


def _chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _sse(w: asyncio.StreamWriter, obj: dict) -> None:
    w.write(_chunked(b"data: " + json.dumps(obj).encode() + b"\n\n"))
    await w.drain()


async def _end_stream(w: asyncio.StreamWriter) -> None:
    w.write(b"0\r\n\r\n")
    await w.drain()
