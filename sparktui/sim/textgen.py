"""A plausible, deterministic answer for a chat request, split into token-sized pieces."""

from __future__ import annotations

import hashlib
import re

_STOP = {
    "the",
    "a",
    "an",
    "is",
    "are",
    "was",
    "what",
    "how",
    "why",
    "who",
    "when",
    "where",
    "which",
    "of",
    "to",
    "in",
    "on",
    "for",
    "and",
    "or",
    "me",
    "my",
    "your",
    "you",
    "i",
    "it",
    "can",
    "do",
    "does",
    "please",
    "tell",
    "about",
    "explain",
    "give",
    "with",
    "be",
    "this",
    "that",
    "write",
    "say",
}

_BODIES = [
    "The short version: {topic} comes down to a few moving parts that have to agree with each other. "
    "Start from the constraint that matters most, check it directly, and only then tune the rest. "
    "If something still looks off, compare one known-good setup with the failing one, one difference at a time.",
    "Good question. {topic} is easiest to reason about in three steps: what goes in, what has to happen "
    "in the middle, and what you can observe at the end. Most surprises come from the middle step, "
    "so measure there first before changing anything else.",
    "Here is how I would approach {topic}. First, write down what you expect to see. Second, run the "
    "smallest experiment that could prove you wrong. Third, keep notes of every change, because the "
    "interesting answer is usually hiding in the one you forgot to record.",
    "{topic} sounds complicated, but the core idea is simple: every piece has a clear job, and the whole "
    "works when each piece gets what it needs on time. When it fails, the first missing input is almost "
    "always the real cause, and everything after it is a symptom.",
]


def topic_of(text: str) -> str:
    words = [w for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9+.#-]*", text) if w.lower() not in _STOP]
    return " ".join(words[:4]) or "your question"


def answer(prompt: str) -> str:
    """Answer the last user turn `prompt`."""
    text = prompt.strip()
    low = text.lower()
    if not text:
        return "It looks like the message was empty. What would you like to talk about?"
    if re.fullmatch(r"(hi|hello|hey)( there)?[!.]?", low) or low.startswith(("hi ", "hello", "hey ")):
        return "Hello! How can I help you today?"
    m = re.search(r"(-?\d+)\s*([+*x-])\s*(-?\d+)", low)
    if m:
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        value = a + b if op == "+" else a - b if op == "-" else a * b
        return f"{a} {op} {b} = {value}."
    digest = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    topic = topic_of(text)
    body = _BODIES[digest % len(_BODIES)].format(topic=topic[:1].upper() + topic[1:])
    return body


def pieces(text: str) -> list[str]:
    """Token-sized pieces (about four characters each) that concatenate back to `text`."""
    out: list[str] = []
    for word in re.findall(r"\s*\S+", text):
        while len(word) > 6:
            out.append(word[:4])
            word = word[4:]
        out.append(word)
    return out or [""]


def count_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


_FILLER = (
    "Each step above can be checked on its own, and the numbers it gives are worth writing down. "
    "Once they agree with what the setup promises, the next step builds on solid ground. "
)


def pieces_for(text: str, max_tokens: int | None, min_tokens: int = 0, ignore_eos: bool = False) -> list[str]:
    """The pieces an engine emits for `text` under its stop rules: cut at max_tokens; past the natural end
    (the end-of-sequence token) only when ignore_eos asks for exactly max_tokens, or to reach min_tokens."""
    out = pieces(text)
    want = max(min_tokens, max_tokens or 0 if ignore_eos else 0)
    filler = pieces(" " + _FILLER.strip())
    i = 0
    while len(out) < want:
        out.append(filler[i % len(filler)])
        i += 1
    return out if max_tokens is None else out[: max(0, max_tokens)]
