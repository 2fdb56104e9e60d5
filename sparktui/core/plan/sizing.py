"""Sizing the KV cache in bytes and letting the engine fit the context length, where the image's release can.

On unified memory (a DGX Spark) a fraction of "GPU memory" is a fraction of what the whole host shares, and the
engines read free memory without the page cache: NVIDIA's recipes size the KV cache in bytes instead and let vLLM
pick the longest context that fits. Both are flags of some releases only (each engine's module); a plan that
asks for one the image's release lacks is refused, naming the release that has it.
"""

from __future__ import annotations

import re

from ..engines.versions import at_least

AUTO = "auto"


def sizing_words(
    engine, version: str | None, kv_bytes: int | None, auto_len: bool, max_len: int | None
) -> tuple[list[str], list[str]]:
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
            errors.append(
                f"{on} in this image has no {flag} (it came with {engine.label} {since}): use the "
                f"memory fraction, or an image with {engine.label} {since} or newer"
            )
        else:
            words += [flag, str(kv_bytes)]
    if auto_len:
        flag, since = engine.vocabulary.get("context_length"), engine.auto_len_since
        if max_len is not None:
            errors.append(f"a context length of {max_len} and {AUTO} both asked: give one")
        elif flag is None or since is None:
            errors.append(f"{engine.label} cannot fit the context length itself: give a length")
        elif version and not at_least(version, since):
            errors.append(
                f"{on} in this image has no {flag} {AUTO} (it came with {engine.label} {since}): give a "
                f"length, or use an image with {engine.label} {since} or newer"
            )
        else:
            words += [flag, AUTO]
    return words, errors


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: str) -> int:
    """Bytes from `21474836480`, `20G`, `20GiB` or `512M` (binary units, as the fit shows GiB); ValueError else."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", text.upper())
    if not m:
        raise ValueError(f"expected bytes, e.g. 20G or 21474836480 (got {text!r})")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def refusals(engine, version: str | None) -> tuple[str | None, str | None]:
    """Why this release cannot size the KV cache in bytes, and why it cannot fit the length itself (None: it can),
    in the plan's own words, so a form can grey out what the plan would refuse."""
    kv = sizing_words(engine, version, 1, False, None)[1]
    auto = sizing_words(engine, version, None, True, None)[1]
    if engine is None:  # no engine known: nothing to refuse yet
        return None, None
    return (kv[0] if kv else None), (auto[0] if auto else None)
