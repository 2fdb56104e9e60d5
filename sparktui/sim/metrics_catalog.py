"""The Prometheus metrics each engine release serves on /metrics: names, types, help texts, labels, buckets.

Read from the releases' own sources (the subset a metrics reader uses: load, tokens, latencies):
- vLLM 0.33.0: vllm/v1/metrics/loggers.py (PrometheusStatLogger) and vllm/v1/metrics/buckets.py;
  labels model_name, engine.
- vLLM 0.31.0: the same files of that release; vLLM 0.11.0: vllm/v1/metrics/loggers.py (buckets inline).
- SGLang 0.5.23: sglang/srt/observability/metrics_collector.py (SchedulerMetricsCollector with
  model_name, engine_type, tp_rank, pp_rank, moe_ep_rank; TokenizerMetricsCollector with model_name,
  engine_type, and is_streaming on the token counters, request count, TTFT, TPOT and e2e histograms).
- SGLang 0.5.3.post3: sglang/srt/metrics/collector.py (scheduler labels model_name, engine_type, tp_rank,
  pp_rank; tokenizer labels model_name) with the labels set in sglang/srt/managers/scheduler_metrics_mixin.py
  and sglang/srt/managers/tokenizer_manager.py.
- TensorRT-LLM 1.3.0rc3 (its tensorrt_llm/version.py): tensorrt_llm/metrics/collector.py (MetricsCollector: the
  request counter by finished_reason and four histograms, trtllm_ prefix), labelled as
  tensorrt_llm/serve/openai_server.py sets it (model_name and engine_type both "undefined") and served through
  prometheus_client's MultiProcessCollector (mount_metrics). No running/waiting/KV gauges, no token counters:
  those came after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Spec:
    role: str  # what the simulator feeds it: running, waiting, kv_usage, prompt_tokens, ttft, ...
    name: str  # as registered with prometheus_client (a counter's name may end in _total or not)
    kind: str  # gauge | counter | histogram
    help: str
    scope: str = "engine"  # which label set: engine (vLLM), scheduler or tokenizer (SGLang)
    extra: tuple[str, ...] = ()  # labels beyond the scope's
    buckets: tuple[float, ...] = ()


# vllm/v1/metrics/buckets.py (0.33.0); the same values sit inline in loggers.py of 0.11.0 and 0.31.0
VLLM_TTFT = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
VLLM_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
VLLM_LATENCY = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
# TokenizerMetricsCollector's defaults, identical in SGLang 0.5.3.post3 and 0.5.23
SGLANG_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_ITL = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.000,
    2.000,
    4.000,
    6.000,
    8.000,
)
SGLANG_E2E = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)

_VLLM = [
    Spec("running", "vllm:num_requests_running", "gauge", "Number of requests in model execution batches."),
    Spec("waiting", "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."),
    Spec("kv_usage", "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."),
    Spec("prompt_tokens", "vllm:prompt_tokens", "counter", "Number of prefill tokens processed."),
    Spec("generation_tokens", "vllm:generation_tokens", "counter", "Number of generation tokens processed."),
    Spec(
        "requests",
        "vllm:request_success",
        "counter",
        "Count of successfully processed requests.",
        extra=("finished_reason",),
    ),
    Spec(
        "ttft",
        "vllm:time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
        buckets=VLLM_TTFT,
    ),
    Spec(
        "itl",
        "vllm:inter_token_latency_seconds",
        "histogram",
        "Histogram of inter-token latency in seconds.",
        buckets=VLLM_ITL,
    ),
    Spec(
        "tpot",
        "vllm:request_time_per_output_token_seconds",
        "histogram",
        "Histogram of time_per_output_token_seconds per request.",
        buckets=VLLM_ITL,
    ),
    Spec(
        "e2e",
        "vllm:e2e_request_latency_seconds",
        "histogram",
        "Histogram of e2e request latency in seconds.",
        buckets=VLLM_LATENCY,
    ),
    Spec(
        "queue",
        "vllm:request_queue_time_seconds",
        "histogram",
        "Histogram of time spent in WAITING phase for request.",
        buckets=VLLM_LATENCY,
    ),
]
# 0.11.0 also served the per-token series under its old name, deprecated there ("Renamed as
# vllm:inter_token_latency_seconds") and gone by 0.31.0
_VLLM_0_11 = (
    _VLLM[:8]
    + [
        Spec(
            "itl_deprecated",
            "vllm:time_per_output_token_seconds",
            "histogram",
            "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
            buckets=VLLM_ITL,
        )
    ]
    + _VLLM[8:]
)

_SGLANG_0_5_3 = [
    Spec("running", "sglang:num_running_reqs", "gauge", "The number of running requests.", "scheduler"),
    Spec("used_tokens", "sglang:num_used_tokens", "gauge", "The number of used tokens.", "scheduler"),
    Spec("kv_usage", "sglang:token_usage", "gauge", "The token usage.", "scheduler"),
    Spec("gen_throughput", "sglang:gen_throughput", "gauge", "The generation throughput (token/s).", "scheduler"),
    Spec("waiting", "sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", "scheduler"),
    Spec("prompt_tokens", "sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", "tokenizer"),
    Spec(
        "generation_tokens",
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        "tokenizer",
    ),
    Spec("requests", "sglang:num_requests_total", "counter", "Number of requests processed.", "tokenizer"),
    Spec(
        "ttft",
        "sglang:time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
        "tokenizer",
        buckets=SGLANG_TTFT,
    ),
    Spec(
        "itl",
        "sglang:inter_token_latency_seconds",
        "histogram",
        "Histogram of inter-token latency in seconds.",
        "tokenizer",
        buckets=SGLANG_ITL,
    ),
    Spec(
        "e2e",
        "sglang:e2e_request_latency_seconds",
        "histogram",
        "Histogram of End-to-end request latency in seconds",
        "tokenizer",
        buckets=SGLANG_E2E,
    ),
]
_STREAMING = {"prompt_tokens", "generation_tokens", "requests", "ttft", "e2e"}
_SGLANG_0_5_23 = [
    Spec(s.role, s.name, s.kind, s.help, s.scope, ("is_streaming",) if s.role in _STREAMING else (), s.buckets)
    for s in _SGLANG_0_5_3
]
_SGLANG_0_5_23.insert(
    -1,
    Spec(
        "tpot",
        "sglang:request_time_per_output_token_seconds",
        "histogram",
        "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
        "tokenizer",
        ("is_streaming",),
        SGLANG_ITL,
    ),
)

# tensorrt_llm/metrics/collector.py (1.3.0rc3) says it is adapted from vLLM's metrics.py; its bucket lists are
# vLLM's values: TTFT's for time to first token, ITL's for time per output token, the latency one for e2e and queue
_TRTLLM_1_3 = [
    Spec(
        "requests",
        "trtllm_request_success_total",
        "counter",
        "Count of successfully processed requests.",
        extra=("finished_reason",),
    ),
    Spec(
        "e2e",
        "trtllm_e2e_request_latency_seconds",
        "histogram",
        "Histogram of end to end request latency in seconds.",
        buckets=VLLM_LATENCY,
    ),
    Spec(
        "ttft",
        "trtllm_time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
        buckets=VLLM_TTFT,
    ),
    # per request, (last token - first token) / (tokens - 1) (executor/result.py _process_req_perf_metrics)
    Spec(
        "tpot",
        "trtllm_time_per_output_token_seconds",
        "histogram",
        "Histogram of time per output token in seconds.",
        buckets=VLLM_ITL,
    ),
    Spec(
        "queue",
        "trtllm_request_queue_time_seconds",
        "histogram",
        "Histogram of time spent in WAITING phase for request.",
        buckets=VLLM_LATENCY,
    ),
]

# Label values a release sets whatever it serves (else: the served name, engine "0", engine_type "unified", ranks 0)
FIXED_LABELS = {"trtllm": {"model_name": "undefined", "engine_type": "undefined"}}  # openai_server.py __init__
# Engines whose page prometheus_client's MultiProcessCollector writes (a registry of the multiprocess directory's
# files): a family shows only once a series of it was touched, and no _created samples
MULTIPROCESS = {"trtllm"}  # openai_server.py set_prometheus_multiproc_dir + mount_metrics

# release -> (specs, label names per scope); a release not listed plays the newest one at or below it
CATALOG: dict[tuple[str, str], tuple[list[Spec], dict[str, tuple[str, ...]]]] = {
    ("vllm", "0.11.0"): (_VLLM_0_11, {"engine": ("model_name", "engine")}),
    ("vllm", "0.31.0"): (_VLLM, {"engine": ("model_name", "engine")}),
    ("vllm", "0.33.0"): (_VLLM, {"engine": ("model_name", "engine")}),
    ("sglang", "0.5.3.post3"): (
        _SGLANG_0_5_3,
        {"scheduler": ("model_name", "engine_type", "tp_rank", "pp_rank"), "tokenizer": ("model_name",)},
    ),
    ("sglang", "0.5.23"): (
        _SGLANG_0_5_23,
        {
            "scheduler": ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"),
            "tokenizer": ("model_name", "engine_type"),
        },
    ),
    ("trtllm", "1.3.0rc3"): (_TRTLLM_1_3, {"engine": ("model_name", "engine_type")}),
}


def _key(version: str) -> tuple:
    """Release order: 0.5.3 < 0.5.3.post3; 1.3.0rc3 < 1.3.0rc5 < 1.3.0 < 1.3.1."""
    parts = []
    for p in version.replace(".post", ".").split("."):
        m = re.match(r"(\d*)(?:rc(\d+))?", p)
        pre = m.group(2)
        parts.append((int(m.group(1) or 0), 0 if pre is not None else 1, int(pre or 0)))
    return tuple(parts)


def catalog(kind: str, version: str) -> tuple[list[Spec], dict[str, tuple[str, ...]]]:
    known = sorted((v for k, v in CATALOG if k == kind), key=_key)
    if not known:
        raise KeyError(kind)
    below = [v for v in known if _key(v) <= _key(version)]
    return CATALOG[(kind, below[-1] if below else known[0])]
