"""Which Prometheus series of an engine's /metrics carry what the serving view shows, per release.

Data only: the fields sparktui reads, and each engine's series names with the release that renamed
them. Names are the sample names in the exposition text (a Counter's samples end in `_total`).
Checked against every supported release's own source by tests/contract/test_metric_names.py:
- vLLM V1, vllm/v1/metrics/loggers.py (0.11.0, 0.31.0, 0.33.0): vllm:num_requests_running,
  vllm:num_requests_waiting, vllm:kv_cache_usage_perc (was vllm:gpu_cache_usage_perc, "Deprecated in
  0.9.2", hidden in 0.11), Counters vllm:prompt_tokens and vllm:generation_tokens, Histograms
  vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds (new in 0.11, replacing
  vllm:time_per_output_token_seconds).
- SGLang, sglang/srt/metrics/collector.py (0.5.3.post3) and sglang/srt/observability/metrics_collector.py
  (0.5.23): sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage (0-1), Counters
  sglang:prompt_tokens_total and sglang:generation_tokens_total, Histograms
  sglang:time_to_first_token_seconds and sglang:inter_token_latency_seconds. SGLang serves /metrics
  only with --enable-metrics (0.5.3.post3 server_args.py; 0.5.23 arg_groups/fields/observability.py,
  enable_metrics); sparktui plans add it.
"""
from __future__ import annotations

from .versions import at_least

FIELDS = ("running", "waiting", "kv_cache_usage", "prompt_tokens", "generation_tokens", "ttft", "itl")
KINDS = {"running": "gauge", "waiting": "gauge", "kv_cache_usage": "gauge", "prompt_tokens": "counter",
         "generation_tokens": "counter", "ttft": "histogram", "itl": "histogram"}

NAMES: dict[str, dict[str, str]] = {
    "vllm": {"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
             "kv_cache_usage": "vllm:kv_cache_usage_perc", "prompt_tokens": "vllm:prompt_tokens_total",
             "generation_tokens": "vllm:generation_tokens_total", "ttft": "vllm:time_to_first_token_seconds",
             "itl": "vllm:inter_token_latency_seconds"},
    "sglang": {"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs",
               "kv_cache_usage": "sglang:token_usage", "prompt_tokens": "sglang:prompt_tokens_total",
               "generation_tokens": "sglang:generation_tokens_total", "ttft": "sglang:time_to_first_token_seconds",
               "itl": "sglang:inter_token_latency_seconds"},
}
# (engine, field, the release that introduced NAMES' name, the name before it)
RENAMED = [
    ("vllm", "kv_cache_usage", "0.9.2", "vllm:gpu_cache_usage_perc"),
    ("vllm", "itl", "0.11.0", "vllm:time_per_output_token_seconds"),
]


def names_for(engine: str, version: str | None) -> dict[str, str]:
    """field -> series name in this release (an unknown release gets the newest names)."""
    out = dict(NAMES[engine])
    for eng, fld, since, before in RENAMED:
        if eng == engine and version and not at_least(version, since):
            out[fld] = before
    return out


def candidates(engine: str, version: str | None) -> dict[str, tuple[str, ...]]:
    """field -> names to look for, this release's first: an image whose release is unknown still reads."""
    own = names_for(engine, version)
    out = {f: (n,) for f, n in own.items()}
    for eng, fld, _, before in RENAMED:
        if eng == engine:
            out[fld] = tuple(dict.fromkeys(out[fld] + (NAMES[eng][fld], before)))
    return out
