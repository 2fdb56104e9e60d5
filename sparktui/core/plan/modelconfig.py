"""The model's config.json, read from the node holding the model: data from elsewhere, checked before use.

The file is read with a size cap (`head -c` on the node), parsed with finite numbers only and a bounded
nesting depth, and every field the planner reads (sizes, layer and head counts, mlp_only_layers) must be
an integer within a range no real model leaves. Anything else is one ModelConfigError line naming the
field, so no caller loops over a count taken from the file or meets a list where it expected a number.
"""

from __future__ import annotations

import shlex
from typing import Any

from ..state import statefile

MAX_BYTES = 4 << 20  # real config.json files are a few KiB; a multimodal one with a tokenizer map, some 100 KiB
MAX_DEPTH = 32  # real ones nest 3 or 4 levels
SUBCONFIGS = ("text_config", "llm_config", "language_config")  # where multimodal models keep the text model's
_LAYERS = 100_000
# field -> largest value accepted (and 0 the smallest); far above any published model
BOUNDS = {
    "hidden_size": 1 << 20,
    "num_hidden_layers": _LAYERS,
    "vocab_size": 1 << 26,
    "num_experts": 1 << 20,
    "num_local_experts": 1 << 20,
    "n_routed_experts": 1 << 20,
    "decoder_sparse_step": _LAYERS,
    "first_k_dense_replace": _LAYERS,
    "shared_expert_intermediate_size": 1 << 24,
    "num_attention_heads": 1 << 16,
    "num_key_value_heads": 1 << 16,
}
MAX_LIST = _LAYERS  # mlp_only_layers: at most one entry per layer


class ModelConfigError(ValueError):
    """A config.json that cannot be used; str() is one line: could not read WHERE: PROBLEM."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"could not read {where}: {problem}")


def _depth_over(value: Any, limit: int) -> bool:
    """Whether `value` nests deeper than `limit` (iterative: a deep document must not recurse here)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > limit:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def _short(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def check(cfg: Any, where: str = "config.json") -> dict:
    """`cfg` itself when every field the planner reads is in range, else ModelConfigError naming the field."""
    if not isinstance(cfg, dict):
        raise ModelConfigError(where, "holds no JSON object")
    if _depth_over(cfg, MAX_DEPTH):
        raise ModelConfigError(where, f"nested deeper than {MAX_DEPTH} levels")
    for sub in (cfg, *(cfg.get(k) for k in SUBCONFIGS)):
        if not isinstance(sub, dict):
            continue
        for name, hi in BOUNDS.items():
            v = sub.get(name)
            if v is None:
                continue
            if not isinstance(v, int) or isinstance(v, bool):
                raise ModelConfigError(where, f"{name} is {_short(v)}, not an integer")
            if not 0 <= v <= hi:
                raise ModelConfigError(where, f"{name} {_short(v)} is out of range (0..{hi})")
        dense = sub.get("mlp_only_layers")
        if dense is not None:
            if not isinstance(dense, list) or len(dense) > MAX_LIST:
                raise ModelConfigError(where, f"mlp_only_layers is {_short(dense)}, not a list of layer numbers")
            bad = next(
                (x for x in dense if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x <= _LAYERS), None
            )
            if bad is not None:
                raise ModelConfigError(where, f"mlp_only_layers holds {_short(bad)}, not a layer number")
    return cfg


def problem(cfg: Any, where: str = "config.json") -> str | None:
    """check()'s message, or None when the config can be used."""
    try:
        check(cfg, where)
    except ModelConfigError as e:
        return str(e)
    return None


def parse(text: str | bytes, where: str = "config.json") -> dict:
    """A config.json's text to a checked dict, or ModelConfigError (never another exception)."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise ModelConfigError(where, f"larger than {MAX_BYTES >> 20} MiB, not a model's config")
    try:
        data = statefile.parse_json(text, where)
    except statefile.StateFileError as e:
        raise ModelConfigError(where, e.problem) from None
    return check(data, where)


def read_command(model_path: str) -> str:
    """Print config.json of the model directory, at most MAX_BYTES + 1 bytes (nothing when absent)."""
    f = shlex.quote(model_path.rstrip("/") + "/config.json")
    return f"if [ -f {f} ]; then head -c {MAX_BYTES + 1} {f}; fi"


async def fetch(node: Any, model_path: str) -> dict | None:
    """The checked config.json from `node` (an ssh.Node); None when absent, ModelConfigError when unusable."""
    where = f"{getattr(node, 'name', 'node')}:{model_path.rstrip('/')}/config.json"
    r = await node.run(read_command(model_path), timeout=15)
    if not r.ok:
        raise ModelConfigError(where, (r.stderr.strip()[:200] or f"exit {r.exit_status}"))
    if not r.stdout.strip():
        return None
    return parse(r.stdout, where)
