"""Streaming on the simulated engines' generation routes, framed as each engine frames it."""

from __future__ import annotations

import json

import pytest

from sparktui.sim import textgen

from .test_sim_http import request, serve


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("SPARKTUI_SIM_SPEED", "2000")


def events(body: bytes) -> list:
    out = []
    for block in body.decode().split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
async def test_streamed_completion_sends_each_token_then_usage_then_done(kind):
    api, state, port, _ = await serve(kind)
    try:
        status, headers, body, *_ = await request(
            port,
            "POST",
            "/v1/completions",
            {
                "model": "qwen",
                "prompt": "Explain pipeline parallelism",
                "max_tokens": 30,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
        assert status == 200 and headers["content-type"].startswith("text/event-stream")
        ev = events(body)
        assert ev[-1] == "[DONE]"
        usage = ev[-2]
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 30
        tokens = [e for e in ev[:-2] if e["choices"] and e["choices"][0]["text"]]
        assert len(tokens) == 30 and all(e["object"] == "text_completion" for e in tokens)
        finishes = [e["choices"][0]["finish_reason"] for e in ev[:-2]]
        assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
        if kind == "vllm":  # vLLM puts the finish reason on the last token's chunk
            assert ev[-3]["choices"][0]["text"] and len(ev) == 32
        else:  # SGLang sends it in an empty chunk of its own
            assert ev[-3]["choices"][0]["text"] == "" and len(ev) == 33
        assert state.generation_tokens == 30
    finally:
        await api.close()


async def test_stream_without_include_usage_has_no_usage_chunk():
    api, _, port, _ = await serve("vllm")
    try:
        _, _, body, *_ = await request(port, "POST", "/v1/completions", {"prompt": "hi", "stream": True})
        ev = events(body)
        assert ev[-1] == "[DONE]" and all("usage" not in e for e in ev[:-1])
        text = "".join(e["choices"][0]["text"] for e in ev[:-1])
        assert text == " " + textgen.answer("hi")  # stops at its end of sequence, under max_tokens' 16
    finally:
        await api.close()


async def test_sglang_generate_streams_cumulative_text_with_token_counts():
    api, _, port, _ = await serve("sglang")
    try:
        status, _, body, *_ = await request(
            port,
            "POST",
            "/generate",
            {
                "input_ids": list(range(50)),
                "stream": True,
                "sampling_params": {"max_new_tokens": 12, "ignore_eos": True},
            },
        )
        ev = events(body)
        assert status == 200 and ev[-1] == "[DONE]" and len(ev) == 13
        counts = [e["meta_info"]["completion_tokens"] for e in ev[:-1]]
        assert counts == list(range(1, 13))
        texts = [e["text"] for e in ev[:-1]]
        assert all(b.startswith(a) and len(b) > len(a) for a, b in zip(texts, texts[1:]))
        assert ev[-2]["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
        assert ev[0]["meta_info"]["finish_reason"] is None and ev[0]["meta_info"]["prompt_tokens"] == 50
        status, _, body, *_ = await request(port, "POST", "/generate", {"text": "hello", "sampling_params": {}})
        out = json.loads(body)
        assert status == 200 and out["text"] == textgen.answer("hello")
        assert out["meta_info"]["finish_reason"]["type"] == "stop"
    finally:
        await api.close()


async def test_bad_requests_get_the_engines_codes_and_bodies():
    api, _, port, _ = await serve("sglang")
    try:
        status, _, body, *_ = await request(port, "POST", "/generate", {"sampling_params": {}})
        assert status == 400 and "input_ids" in json.loads(body)["error"]["message"]
        status, _, body, *_ = await request(port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": -1})
        err = json.loads(body)
        assert status == 400 and err["object"] == "error" and err["param"] == "max_tokens"
    finally:
        await api.close()
    api, _, port, _ = await serve("vllm")
    warned: list[str] = []
    api.warn = warned.append
    try:
        status, _, body, *_ = await request(port, "POST", "/v1/completions", {"model": "qwen"})
        err = json.loads(body)["error"]
        assert status == 400 and (err["type"], err["param"], err["code"]) == ("BadRequestError", "prompt", 400)
        status, _, body, *_ = await request(
            port, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "frobnicate": 1}
        )
        assert status == 200 and warned == [
            "The following fields were present in the request but ignored: {'frobnicate'}"
        ]
        assert (await request(port, "GET", "/v1/completions"))[0] == 405
    finally:
        await api.close()


async def test_requests_past_the_running_limit_wait_their_turn():
    import asyncio

    from sparktui.sim.timing import TokenTiming

    api, state, port, _ = await serve("vllm")
    state.max_running = 1
    state.timing = TokenTiming(decode_s=40.0, prefill_tok_s=1e6)  # 20 ms a step at this speed: they overlap
    try:
        seen: list[tuple[int, int]] = []
        state.on_prefill = lambda tokens, running: seen.append((running, state.waiting))
        body = {"prompt": "x", "max_tokens": 5, "ignore_eos": True}
        results = await asyncio.gather(*(request(port, "POST", "/v1/completions", body) for _ in range(3)))
        assert all(r[0] == 200 for r in results)
        assert [r for r, _ in seen] == [1, 1, 1] and max(w for _, w in seen) >= 1
        assert state.running == 0 and state.waiting == 0 and state.kv_used == 0
    finally:
        await api.close()
