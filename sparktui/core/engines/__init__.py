"""The engines sparktui can launch: their commands, env, ready lines and health URLs."""
from __future__ import annotations

from types import ModuleType

from . import sglang, vllm

ENGINES: dict[str, ModuleType] = {"sglang": sglang, "vllm": vllm}


def get_engine(name: str) -> ModuleType:
    """The engine module by name; KeyError lists the known ones."""
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r} (expected one of: {', '.join(ENGINES)})") from None


def default_mode(engine: str) -> str:
    return get_engine(engine).MODES[0]
