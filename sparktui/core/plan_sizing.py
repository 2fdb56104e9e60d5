"""Sizing the KV cache in bytes and letting the engine fit the context length, where the image's release can.

On unified memory (a DGX Spark) a fraction of "GPU memory" is a fraction of what the whole host shares, and the
engines read free memory without the page cache: NVIDIA's recipes size the KV cache in bytes instead and let vLLM
pick the longest context that fits. Both are flags of some releases only (each engine's module); a plan that
asks for one the image's release lacks is refused, naming the release that has it.
"""
from __future__ import annotations

from .engines.versions import at_least

AUTO = "auto"


def sizing_words(engine, version: str | None, kv_bytes: int | None, auto_len: bool,
                 max_len: int | None) -> tuple[list[str], list[str]]:
    """(engine words to append, errors) for these choices; nothing asked gives nothing."""
    words: list[str] = []
    errors: list[str] = []
    if engine is None:
        return words, errors
    on = f"{engine.label} {version}" if version else engine.label
    if kv_bytes is not None:
        flag, since = engine.kv_bytes_flag, engine.kv_bytes_since
        if kv_bytes <= 0:
            errors.append(f"the KV cache size must be positive (got {kv_bytes})")
        elif flag is None:
            errors.append(f"{engine.label} has no flag that sizes the KV cache in bytes: use the memory fraction")
        elif since and version and not at_least(version, since):
            errors.append(f"{on} in this image has no {flag} (it came with {engine.label} {since}): use the "
                          f"memory fraction, or an image with {engine.label} {since} or newer")
        else:
            words += [flag, str(kv_bytes)]
    if auto_len:
        flag, since = engine.vocabulary.get("context_length"), engine.auto_len_since
        if max_len is not None:
            errors.append(f"a context length of {max_len} and {AUTO} both asked: give one")
        elif flag is None or since is None:
            errors.append(f"{engine.label} cannot fit the context length itself: give a length")
        elif version and not at_least(version, since):
            errors.append(f"{on} in this image has no {flag} {AUTO} (it came with {engine.label} {since}): give a "
                          f"length, or use an image with {engine.label} {since} or newer")
        else:
            words += [flag, AUTO]
    return words, errors
