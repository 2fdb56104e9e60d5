"""The generation routes: /v1/chat/completions and /v1/completions (both engines), SGLang's /generate.

Streaming follows each engine's source: server-sent events, one `data: {json}` chunk per token, then an
optional usage chunk (`stream_options.include_usage`, with `choices: []`) and `data: [DONE]`.
- vLLM (vllm/entrypoints/openai/chat_completion/serving.py, completion/serving.py in 0.33.0): chat opens
  with a role chunk; the last token's chunk carries finish_reason; completions have no role chunk.
- SGLang (sglang/srt/entrypoints/openai/serving_chat.py, serving_completions.py in 0.5.23): the same, but
  finish_reason comes in a chunk of its own after the last token; /generate (srt/entrypoints/http_server.py
  generate_request) streams cumulative `text` and `output_ids` with meta_info.completion_tokens, then
  `data: [DONE]`.
Request fields these routes do not use are accepted and ignored, as both engines do (vLLM logs a warning).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from . import http1, textgen
from .httpapi import ApiServer, EngineDead, generate

# the fields each route reads or knows; the rest are ignored as upstream's request models ignore them
_OPENAI_KNOWN = {
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "n",
    "best_of",
    "stop",
    "stop_token_ids",
    "seed",
    "ignore_eos",
    "min_tokens",
    "logprobs",
    "top_logprobs",
    "prompt_logprobs",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "length_penalty",
    "logit_bias",
    "allowed_token_ids",
    "bad_words",
    "user",
    "echo",
    "suffix",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "functions",
    "function_call",
    "response_format",
    "structured_outputs",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "chat_template",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "include_stop_str_in_output",
    "truncate_prompt_tokens",
    "use_beam_search",
    "reasoning_effort",
    "priority",
    "request_id",
    "cache_salt",
    "documents",
    "mm_processor_kwargs",
    "return_tokens_as_token_ids",
    "return_token_ids",
    "kv_transfer_params",
    "vllm_xargs",
    "metadata",
    "store",
    "service_tier",
    "modalities",
    "prediction",
    "web_search_options",
}


def error(api: ApiServer, code: int, message: str, param: str | None = None) -> dict:
    kind = {
        400: "BadRequestError",
        404: "NotFoundError",
        500: "InternalServerError",
        503: "ServiceUnavailableError",
    }.get(code, "Error")
    if api.state.kind == "vllm":  # vllm/entrypoints/serve/exception_handling/error_response.py
        return {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return {"object": "error", "message": message, "type": kind, "param": param, "code": code}


def _parse(body: bytes) -> dict | None:
    try:
        req = json.loads(body or b"{}")
    except ValueError:
        return None
    return req if isinstance(req, dict) else None


async def _precheck(api: ApiServer, req: dict | None, w, keep: bool) -> int | None:
    st = api.state
    if req is None:
        await http1.respond(w, 400, error(api, 400, "Invalid JSON in request body"), keep=keep)
        return 400
    if st.status == "dead":
        code = 500 if st.kind == "vllm" else 503
        msg = (
            "EngineCore encountered an issue. See stack trace (above) for the root cause."
            if st.kind == "vllm"
            else "The server is not healthy: the scheduler is dead."
        )
        await http1.respond(w, code, error(api, code, msg), keep=keep)
        return code
    model = req.get("model")
    if st.kind == "vllm" and model not in (None, st.served_name):
        await http1.respond(w, 404, error(api, 404, f"The model `{model}` does not exist.", "model"), keep=keep)
        return 404
    if st.kind == "vllm":
        ignored = sorted(set(req) - _OPENAI_KNOWN)
        if ignored:  # vllm/entrypoints/openai/engine/protocol.py OpenAIBaseModel.__log_extra_fields__
            api.warn(f"The following fields were present in the request but ignored: {set(ignored)}")
    return None


def _int_field(req: dict, *names: str) -> tuple[int | None, str | None]:
    """The first of `names` present, as a non-negative int; else (None, the offending name)."""
    for name in names:
        if name in req and req[name] is not None:
            v = req[name]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                return None, name
            return v, None
    return None, None


async def _bad(api: ApiServer, w, keep: bool, msg: str, param: str | None) -> int:
    await http1.respond(w, 400, error(api, 400, msg, param), keep=keep)
    return 400


def _prompt_tokens(messages: list) -> int:
    total = 0
    for m in messages:
        if isinstance(m, dict):
            content = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            total += textgen.count_tokens(text or "") + 4  # role markers of the chat template
    return total + 3


def _last_user_text(messages: list) -> str:
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
            return str(content or "")
    return ""


def _prompt_of(prompt) -> tuple[str, int]:
    """(text, tokens) of a completion prompt: a string, token ids, or a batch of either (the first)."""
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return "", len(prompt)
    if isinstance(prompt, list) and prompt:
        return _prompt_of(prompt[0])
    text = prompt if isinstance(prompt, str) else ""
    return text, textgen.count_tokens(text)


async def _too_long(api: ApiServer, w, keep: bool, prompt_tokens: int) -> int | None:
    if prompt_tokens < api.state.max_model_len:
        return None
    msg = (
        f"This model's maximum context length is {api.state.max_model_len} tokens. However, your "
        f"request has {prompt_tokens} input tokens. Please reduce the length of the input messages."
    )
    return await _bad(api, w, keep, msg, None)


async def _dead_midway(api: ApiServer, w, keep: bool) -> int:
    await http1.respond(
        w,
        500,
        error(api, 500, "EngineCore encountered an issue. See stack trace (above) for the root cause."),
        keep=keep,
    )
    return 500


def _usage(prompt_tokens: int, n: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}


async def chat(api: ApiServer, body: bytes, w: asyncio.StreamWriter, keep: bool) -> int:
    req = _parse(body)
    code = await _precheck(api, req, w, keep)
    if code is not None:
        return code
    assert req is not None
    messages = req.get("messages")
    if not isinstance(messages, list) or not messages:
        return await _bad(api, w, keep, "messages must be a non-empty list", "messages")
    max_tokens, bad = _int_field(req, "max_completion_tokens", "max_tokens")
    if bad:
        return await _bad(api, w, keep, f"{bad} must be a non-negative integer", bad)
    min_tokens, _ = _int_field(req, "min_tokens")
    prompt_tokens = _prompt_tokens(messages)
    if (code := await _too_long(api, w, keep, prompt_tokens)) is not None:
        return code
    text = textgen.answer(_last_user_text(messages))
    opts = {"ignore_eos": bool(req.get("ignore_eos")), "min_tokens": min_tokens or 0}
    rid = f"chatcmpl-{uuid.uuid4().hex[:32]}"
    created = int(time.time())
    name = api.state.served_name
    if not req.get("stream"):
        try:
            out, finish, n = await generate(api.state, prompt_tokens, text, max_tokens, **opts)
        except EngineDead:
            return await _dead_midway(api, w, keep)
        await http1.respond(
            w,
            200,
            {
                "id": rid,
                "object": "chat.completion",
                "created": created,
                "model": name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": out, "reasoning_content": None, "tool_calls": []},
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                ],
                "usage": _usage(prompt_tokens, n),
            },
            keep=keep,
        )
        return 200
    include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
    await http1.start_stream(w, keep)
    vllm = api.state.kind == "vllm"

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    await http1.sse(w, chunk({"role": "assistant", "content": ""}))

    async def emit(part: str, i: int, finish: str | None) -> None:
        # vLLM puts the finish reason on the last token's chunk
        await http1.sse(w, chunk({"content": part}, finish if vllm else None))

    try:
        _, finish, n = await generate(api.state, prompt_tokens, text, max_tokens, emit, streaming=True, **opts)
    except EngineDead:
        await http1.sse(w, {"error": error(api, 500, "engine died")})
        await http1.end_stream(w)
        return 200
    if not vllm:
        await http1.sse(w, chunk({}, finish))
    if include_usage:
        await http1.sse(w, dict(chunk({}), choices=[], usage=_usage(prompt_tokens, n)))
    await http1.sse(w, "[DONE]")
    await http1.end_stream(w)
    return 200


async def completion(api: ApiServer, body: bytes, w: asyncio.StreamWriter, keep: bool) -> int:
    req = _parse(body)
    code = await _precheck(api, req, w, keep)
    if code is not None:
        return code
    assert req is not None
    if "prompt" not in req:
        return await _bad(api, w, keep, "prompt is required", "prompt")
    text_in, prompt_tokens = _prompt_of(req.get("prompt"))
    max_tokens, bad = _int_field(req, "max_tokens")
    if bad:
        return await _bad(api, w, keep, f"{bad} must be a non-negative integer", bad)
    max_tokens = 16 if max_tokens is None else max_tokens  # both engines' CompletionRequest default
    min_tokens, _ = _int_field(req, "min_tokens")
    if (code := await _too_long(api, w, keep, prompt_tokens)) is not None:
        return code
    text = " " + textgen.answer(text_in)
    opts = {"ignore_eos": bool(req.get("ignore_eos")), "min_tokens": min_tokens or 0}
    rid = f"cmpl-{uuid.uuid4().hex[:32]}"
    created = int(time.time())
    name = api.state.served_name
    if not req.get("stream"):
        try:
            out, finish, n = await generate(api.state, prompt_tokens, text, max_tokens, **opts)
        except EngineDead:
            return await _dead_midway(api, w, keep)
        await http1.respond(
            w,
            200,
            {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": name,
                "choices": [{"index": 0, "text": out, "logprobs": None, "finish_reason": finish}],
                "usage": _usage(prompt_tokens, n),
            },
            keep=keep,
        )
        return 200
    include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
    vllm = api.state.kind == "vllm"
    await http1.start_stream(w, keep)

    def chunk(piece: str, finish: str | None) -> dict:
        choice = {"index": 0, "text": piece, "logprobs": None, "finish_reason": finish}
        if vllm:
            choice["stop_reason"] = None
        return {"id": rid, "object": "text_completion", "created": created, "model": name, "choices": [choice]}

    async def emit(part: str, i: int, finish: str | None) -> None:
        await http1.sse(w, chunk(part, finish if vllm else None))

    try:
        _, finish, n = await generate(api.state, prompt_tokens, text, max_tokens, emit, streaming=True, **opts)
    except EngineDead:
        await http1.sse(w, {"error": error(api, 500, "engine died")})
        await http1.end_stream(w)
        return 200
    if not vllm:
        await http1.sse(w, chunk("", finish))
    if include_usage:
        await http1.sse(
            w,
            {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": name,
                "choices": [],
                "usage": _usage(prompt_tokens, n),
            },
        )
    await http1.sse(w, "[DONE]")
    await http1.end_stream(w)
    return 200


async def native_generate(api: ApiServer, body: bytes, w: asyncio.StreamWriter, keep: bool) -> int:
    req = _parse(body)
    code = await _precheck(api, req, w, keep)
    if code is not None:
        return code
    assert req is not None
    ids = req.get("input_ids")
    if isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
        text_in, prompt_tokens = "", len(ids)
    elif isinstance(req.get("text"), (str, list)) and req.get("text"):
        text_in, prompt_tokens = _prompt_of(req["text"])
    else:  # sglang/srt/managers/io_struct.py GenerateReqInput, raised as ValueError -> 400
        await http1.respond(
            w, 400, {"error": {"message": "Either text, input_ids or input_embeds should be provided."}}, keep=keep
        )
        return 400
    params = req.get("sampling_params") or {}
    if not isinstance(params, dict):
        await http1.respond(w, 400, {"error": {"message": "sampling_params must be an object"}}, keep=keep)
        return 400
    max_new = params.get("max_new_tokens")
    max_new = max_new if isinstance(max_new, int) and max_new >= 0 else 128  # SamplingParams default
    opts = {"ignore_eos": bool(params.get("ignore_eos")), "min_tokens": int(params.get("min_new_tokens") or 0)}
    text = textgen.answer(text_in)
    rid = uuid.uuid4().hex

    def result(out: str, n: int, finish: str | None) -> dict:
        reason = (
            None
            if finish is None
            else ({"type": "length", "length": n} if finish == "length" else {"type": "stop", "matched": 151645})
        )
        return {
            "text": out,
            "output_ids": list(range(1000, 1000 + n)),
            "meta_info": {
                "id": rid,
                "finish_reason": reason,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": n,
                "cached_tokens": 0,
            },
        }

    if not req.get("stream"):
        try:
            out, finish, n = await generate(api.state, prompt_tokens, text, max_new, **opts)
        except EngineDead:
            return await _dead_midway(api, w, keep)
        await http1.respond(w, 200, result(out, n, finish), keep=keep)
        return 200
    await http1.start_stream(w, keep)
    so_far: list[str] = []

    async def emit(part: str, i: int, finish: str | None) -> None:
        so_far.append(part)  # SGLang streams the whole text so far unless --incremental-streaming-output
        await http1.sse(w, result("".join(so_far), i, finish))

    try:
        await generate(api.state, prompt_tokens, text, max_new, emit, streaming=True, **opts)
    except EngineDead:
        await http1.sse(w, {"error": {"message": "The server is not healthy: the scheduler is dead."}})
    await http1.sse(w, "[DONE]")
    await http1.end_stream(w)
    return 200


ROUTES = {
    "vllm": {"/v1/chat/completions": chat, "/v1/completions": completion},
    "sglang": {"/v1/chat/completions": chat, "/v1/completions": completion, "/generate": native_generate},
}
