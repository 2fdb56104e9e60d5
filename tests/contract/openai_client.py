"""Runs inside a contract environment: the official `openai` client against BASE_URL, streaming and not.
Prints one JSON object of what it saw; any exception fails the run (exit 1, traceback on stderr).

    python openai_client.py BASE_URL MODEL
"""

import json
import sys

import openai


def main(base: str, model: str) -> None:
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-none", max_retries=0, timeout=60)
    out = {"models": [m.id for m in client.models.list().data]}
    msgs = [{"role": "user", "content": "What is 19+23?"}]
    chat = client.chat.completions.create(model=model, messages=msgs, max_tokens=64)
    out["chat"] = {
        "text": chat.choices[0].message.content,
        "finish": chat.choices[0].finish_reason,
        "usage": chat.usage.model_dump(),
    }
    chunks = list(
        client.chat.completions.create(
            model=model, messages=msgs, max_tokens=64, stream=True, stream_options={"include_usage": True}
        )
    )
    out["chat_stream"] = {
        "text": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
        "finish": [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason],
        "usage": chunks[-1].usage.model_dump() if chunks[-1].usage else None,
        "chunks": len(chunks),
    }
    comp = client.completions.create(model=model, prompt="Tensor parallelism is", max_tokens=12)
    out["completion"] = {
        "text": comp.choices[0].text,
        "finish": comp.choices[0].finish_reason,
        "usage": comp.usage.model_dump(),
    }
    chunks = list(
        client.completions.create(
            model=model,
            prompt="Tensor parallelism is",
            max_tokens=12,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    out["completion_stream"] = {
        "text": "".join(c.choices[0].text for c in chunks if c.choices),
        "finish": [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason],
        "usage": chunks[-1].usage.model_dump() if chunks[-1].usage else None,
        "chunks": len(chunks),
    }
    try:
        client.chat.completions.create(model="no-such-model", messages=msgs)
        out["unknown_model"] = None
    except openai.APIStatusError as e:
        out["unknown_model"] = {"status": e.status_code, "message": str(e)}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
