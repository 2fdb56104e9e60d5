"""Is the endpoint really serving? /health, then /v1/models, then one short chat completion.

An open port proves little (SGLang's HTTP server outlives a dead scheduler, vLLM's /version
answers while the engine core is dead), so readiness ends with a real answer. Requests go through
an SSH local forward to the head; urllib runs in a thread, with proxies off (the forward is local).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

PROMPT = "Reply with one short sentence: are you ready?"
MAX_TOKENS = 32
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Check:
    """One readiness probe: how far it got and, when it got to the end, what the answer cost."""

    ok: bool
    stage: str  # health | models | chat: the last stage tried
    detail: str = ""
    status: int | None = None  # HTTP status of the last request (None: no HTTP answer)
    refused: bool = False  # nothing listens on the local end: the forward is gone
    model: str | None = None
    latency_s: float | None = None
    completion_tokens: int = 0
    tokens_per_s: float | None = None
    reply: str = ""


def _request(url: str, body: dict | None, timeout: float, api_key: str | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"  # what both engines expect with --api-key
    req = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET", headers=headers)
    try:
        with _OPENER.open(req, timeout=timeout) as r:
            return r.status, r.read(1 << 20)
    except urllib.error.HTTPError as e:
        return e.code, e.read(1 << 16) if e.fp else b""


async def _call(
    url: str, body: dict | None, timeout: float, api_key: str | None = None
) -> tuple[int | None, bytes, str, bool]:
    """(status, body, error words, refused) without raising."""
    try:
        status, data = await asyncio.to_thread(_request, url, body, timeout, api_key)
        return status, data, "", False
    except urllib.error.URLError as e:
        refused = isinstance(e.reason, ConnectionRefusedError)
        return None, b"", str(e.reason), refused
    except ConnectionRefusedError as e:
        return None, b"", str(e), True
    except (OSError, socket.timeout, ValueError) as e:  # reset, remote closed, timeout, bad status line
        return None, b"", str(e) or type(e).__name__, False


def _json(data: bytes) -> dict:
    try:
        value = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def check_endpoint(
    base: str,
    served_name: str | None = None,
    timeout: float = 10.0,
    chat_timeout: float = 120.0,
    api_key: str | None = None,
) -> Check:
    """Probe `base` (http://127.0.0.1:PORT): health, models, then a chat completion."""
    status, _, err, refused = await _call(base + "/health", None, timeout)
    if status != 200:
        why = f"HTTP {status}" if status is not None else err
        return Check(False, "health", f"/health: {why}", status, refused)
    status, data, err, refused = await _call(base + "/v1/models", None, timeout, api_key)
    models = [m.get("id") for m in _json(data).get("data", []) if isinstance(m, dict)] if status == 200 else []
    if not models:
        why = f"HTTP {status}" if status is not None else err
        return Check(False, "models", f"/v1/models: {why if status != 200 else 'no model listed'}", status, refused)
    model = served_name if served_name in models else str(models[0])
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "stream": False,
    }
    t0 = time.monotonic()
    status, data, err, refused = await _call(base + "/v1/chat/completions", body, chat_timeout, api_key)
    latency = time.monotonic() - t0
    doc = _json(data)
    choices = doc.get("choices") or []
    if status != 200 or not choices:
        why = f"HTTP {status}: {data[:200].decode('utf-8', 'replace')}" if status is not None else err
        return Check(False, "chat", f"/v1/chat/completions: {why}", status, refused, model)
    first = choices[0] if isinstance(choices[0], dict) else {}
    message = first.get("message") if isinstance(first.get("message"), dict) else {}
    tokens = (doc.get("usage") or {}).get("completion_tokens")
    tokens = int(tokens) if isinstance(tokens, (int, float)) else 0
    return Check(
        True,
        "chat",
        "answered",
        status,
        False,
        model,
        latency,
        tokens,
        tokens / latency if tokens and latency > 0 else None,
        str(message.get("content") or "")[:200],
    )
