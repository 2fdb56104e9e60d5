"""What a simulated image can load: the architectures of each engine release it plays, its transformers
release and the model types that knows, and the quantization methods. Read from the real releases in the
contract tier (tests/contract/test_support_probe.py checks the same answers against them):
- Qwen3_5MoeForConditionalGeneration: in SGLang 0.5.23 (sglang/srt/models/qwen3_5.py EntryClass) and vLLM
  0.31.0/0.33.0 (model_executor/models/registry.py); absent from SGLang 0.5.3.post3 and vLLM 0.11.0;
- model type qwen3_5_moe: transformers 5 (5.17.0/5.19.0/5.20.2 in those releases' environments) knows it,
  4.57.x does not ("does not recognize this architecture").
The shims (shims/transformers, vllm.model_executor..., sglang.srt...) answer from here, as the real packages
answer the support check's probe (core/plan/support.py). TensorRT-LLM's registry is the shim package itself
(shims/tensorrt_llm/_torch/models: a few architectures registered by decorator, read by the probe from the
source as from a real image, and looked up by the simulated trtllm-serve).
"""

from __future__ import annotations

import os

from .sglang_args import VERSION_ENV as SGLANG_ENV
from .vllm_args import VERSION_ENV as VLLM_ENV, DEFAULT_VERSION as VLLM_DEFAULT

SGLANG_DEFAULT = "0.5.23"
# every played release lists these (checked in each release's registry)
COMMON_ARCHS = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
ARCH_SINCE = {"Qwen3_5MoeForConditionalGeneration": {"sglang": (0, 5, 23), "vllm": (0, 31, 0)}}
# the transformers each played release ships with (its contract environment)
TRANSFORMERS = {
    ("sglang", "0.5.3.post3"): "4.57.1",
    ("sglang", "0.5.23"): "5.19.0",
    ("vllm", "0.11.0"): "4.57.6",
    ("vllm", "0.31.0"): "5.17.0",
    ("vllm", "0.33.0"): "5.20.2",
}
MODEL_TYPES = ("llama", "qwen2", "qwen3", "qwen3_moe")
MODEL_TYPE_SINCE = {"qwen3_5_moe": (5, 0), "qwen3_5_moe_text": (5, 0)}
QUANTIZATION = ("fp8", "awq", "gptq", "compressed-tensors", "modelopt", "bitsandbytes")


def _v(text: str) -> tuple[int, ...]:
    out = []
    for p in text.split("."):
        digits = "".join(c for c in p if c.isdigit())
        if not digits:
            break
        out.append(int(digits))
        if digits != p:
            break
    return tuple(out)


def release(engine: str) -> str:
    if engine == "vllm":
        return os.environ.get(VLLM_ENV) or VLLM_DEFAULT
    return os.environ.get(SGLANG_ENV) or SGLANG_DEFAULT


def archs(engine: str) -> set[str]:
    v = _v(release(engine))
    return set(COMMON_ARCHS) | {a for a, since in ARCH_SINCE.items() if v >= since[engine]}


def transformers_version() -> str:
    """The transformers of the image: the SGLang image's when it plays SGLang (a vLLM release otherwise)."""
    engine = "sglang" if os.environ.get(SGLANG_ENV) and not os.environ.get(VLLM_ENV) else "vllm"
    return TRANSFORMERS.get((engine, release(engine)), "5.20.2")


def model_types() -> set[str]:
    v = _v(transformers_version())
    return set(MODEL_TYPES) | {t for t, since in MODEL_TYPE_SINCE.items() if v >= since}


def refusal(config: dict) -> str | None:
    """What the played release's transformers raises on this config.json (AutoConfig, which both engines
    call first), or None when it reads it. transformers' own words (models/auto/configuration_auto.py)."""
    mt = config.get("model_type") if isinstance(config, dict) else None
    if not isinstance(mt, str) or mt in model_types():
        return None
    return (
        f"ValueError: The checkpoint you are trying to load has model type `{mt}` but Transformers does not "
        "recognize this architecture. This could be because of an issue with the checkpoint, or because your "
        "version of Transformers is out of date."
    )
