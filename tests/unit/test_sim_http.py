"""The simulated engines' HTTP side, served in-process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json

import pytest

from sparktui.sim import httpapi, textgen


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("SPARKTUI_SIM_SPEED", "2000")


async def serve(kind: str, status: str = "ready", max_len: int = 4096):
    state = httpapi.EngineState(kind, "qwen", "/models/qwen", max_len, "9.9.9")
    state.status = status
    access: list[str] = []
    api = httpapi.ApiServer(state, lambda client, req: access.append(req))
    await api.start("127.0.0.1", 0)
    port = api._server.sockets[0].getsockname()[1]
    return api, state, port, access


async def request(
    port: int, method: str, path: str, body: dict | bytes | None = None, keep: bool = False, reader=None, writer=None
):
    """One HTTP/1.1 exchange; returns (status, headers, body bytes, reader, writer)."""
    if reader is None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
    conn = "keep-alive" if keep else "close"
    writer.write(
        f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(payload)}\r\nconnection: {conn}\r\n\r\n".encode()
        + payload
    )
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding") == "chunked":
        data = b""
        while size := int((await reader.readline()).strip(), 16):
            data += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()
    else:
        data = await reader.readexactly(int(headers.get("content-length", 0)))
    return status, headers, data, reader, writer


async def test_health_follows_engine_status_for_sglang():
    api, state, port, access = await serve("sglang", status="starting")
    try:
        assert (await request(port, "GET", "/health"))[0] == 503
        state.status = "ready"
        assert (await request(port, "GET", "/health"))[0] == 200
        assert (await request(port, "GET", "/health_generate"))[0] == 200
        state.status = "dead"
        assert (await request(port, "GET", "/health"))[0] == 503
        assert (await request(port, "GET", "/version"))[0] == 200  # answers even with a dead engine
        assert access[0] == '"GET /health HTTP/1.1" 503 Service Unavailable'
    finally:
        await api.close()


async def test_models_lists_the_served_name_and_context():
    api, _, port, _ = await serve("vllm", max_len=131072)
    try:
        status, _, body, *_ = await request(port, "GET", "/v1/models")
        card = json.loads(body)["data"][0]
        assert status == 200 and card["id"] == "qwen" and card["max_model_len"] == 131072
        assert card["root"] == "/models/qwen"
    finally:
        await api.close()


async def test_chat_completion_answers_with_usage_and_respects_max_tokens():
    api, state, port, _ = await serve("vllm")
    try:
        question = "Explain tensor parallelism across two nodes"
        status, _, body, *_ = await request(
            port, "POST", "/v1/chat/completions", {"model": "qwen", "messages": [{"role": "user", "content": question}]}
        )
        out = json.loads(body)
        expected = textgen.answer(question)
        assert status == 200 and out["choices"][0]["message"]["content"] == expected
        assert out["choices"][0]["finish_reason"] == "stop"
        assert out["usage"]["completion_tokens"] == len(textgen.pieces(expected))
        assert out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"]
        status, _, body, *_ = await request(
            port, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": question}], "max_tokens": 3}
        )
        short = json.loads(body)
        assert short["choices"][0]["finish_reason"] == "length" and short["usage"]["completion_tokens"] == 3
        assert state.requests == 2 and state.running == 0
    finally:
        await api.close()


async def test_streaming_chat_sends_role_then_content_then_done():
    api, _, port, _ = await serve("sglang")
    try:
        status, headers, body, *_ = await request(
            port,
            "POST",
            "/v1/chat/completions",
            {
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "What is 6*7?"}],
            },
        )
        assert status == 200 and headers["content-type"].startswith("text/event-stream")
        events = [e[len("data: ") :] for e in body.decode().split("\n\n") if e.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        assert "42" in text
        assert [c for c in chunks if c["choices"]][-1]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["usage"]["completion_tokens"] == len(textgen.pieces(text))
    finally:
        await api.close()


async def test_errors_look_like_the_engine_s():
    api, state, port, _ = await serve("vllm")
    try:
        status, _, body, *_ = await request(
            port, "POST", "/v1/chat/completions", {"model": "other", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert status == 404 and "does not exist" in json.loads(body)["error"]["message"]
        assert (await request(port, "POST", "/v1/chat/completions", b"{not json"))[0] == 400
        assert (await request(port, "POST", "/v1/chat/completions", {"messages": []}))[0] == 400
        assert (await request(port, "GET", "/nope"))[0] == 404
        state.status = "dead"
        assert (await request(port, "GET", "/health"))[0] == 503
        assert (await request(port, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}))[
            0
        ] == 500
    finally:
        await api.close()


async def test_keep_alive_serves_several_requests_on_one_connection():
    api, _, port, access = await serve("vllm")
    try:
        status, _, _, reader, writer = await request(port, "GET", "/health", keep=True)
        assert status == 200
        status, _, body, reader, writer = await request(
            port, "GET", "/v1/models", keep=True, reader=reader, writer=writer
        )
        assert status == 200 and json.loads(body)["object"] == "list"
        writer.close()
        assert len(access) == 2
    finally:
        await api.close()


def test_answers_are_stable_rebuildable_and_do_arithmetic():
    question = "How do I size the KV cache for a 122B MoE model?"
    text = textgen.answer(question)
    assert text == textgen.answer(question) and text != textgen.answer("Why is NCCL slow over TCP?")
    assert "".join(textgen.pieces(text)) == text
    for a, b in ((3, 4), (120, 7), (-5, 9)):
        assert str(a + b) in textgen.answer(f"what is {a}+{b}?")
        assert str(a * b) in textgen.answer(f"compute {a} * {b}")


@pytest.mark.parametrize(
    "kind,open_paths,guarded",
    [
        ("sglang", ["/health"], ["/v1/models", "/get_model_info"]),  # SGLang: all but /health* and /metrics
        ("vllm", ["/health", "/version"], ["/v1/models"]),  # vLLM: the /v1 routes
    ],
)
async def test_an_api_key_is_demanded_like_the_engines_do(kind, open_paths, guarded):
    from sparktui.core.deploy.readiness import check_endpoint

    state = httpapi.EngineState(kind, "qwen", "/models/qwen", 4096, "9.9.9", api_key="sk-test-key-1")
    state.status = "ready"
    api = httpapi.ApiServer(state, lambda client, req: None)
    await api.start("127.0.0.1", 0)
    port = api._server.sockets[0].getsockname()[1]
    try:
        for path in open_paths:
            assert (await request(port, "GET", path))[0] == 200, path
        for path in guarded:
            status, _, data, _, _ = await request(port, "GET", path)
            assert (status, json.loads(data)) == (401, {"error": "Unauthorized"}), path
        base = f"http://127.0.0.1:{port}"
        assert (await check_endpoint(base, "qwen", timeout=5)).status == 401
        chk = await check_endpoint(base, "qwen", timeout=5, api_key="sk-test-key-1")
        assert chk.ok, chk.detail
    finally:
        await api.close()
