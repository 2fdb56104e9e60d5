"""Which Prometheus series of an engine's /metrics carry what the serving view shows, per release.

The fields sparktui reads, and how an engine's series names in a release follow from its newest names and
the releases that renamed them, both on its Engine (metric_series, metric_renamed; each module names the
sources it read). Names are the sample names in the exposition text (a Counter's samples end in `_total`),
checked against every supported release's own source by tests/contract/test_metric_names.py.
"""

from __future__ import annotations

from typing import Mapping

from .versions import at_least

FIELDS = ("running", "waiting", "kv_cache_usage", "prompt_tokens", "generation_tokens", "ttft", "itl")
KINDS = {
    "running": "gauge",
    "waiting": "gauge",
    "kv_cache_usage": "gauge",
    "prompt_tokens": "counter",
    "generation_tokens": "counter",
    "ttft": "histogram",
    "itl": "histogram",
}


def names_at(series: Mapping[str, str], renamed, version: str | None) -> dict[str, str]:
    """field -> series name in this release, given an engine's newest names and its renames (Engine.metric_series,
    Engine.metric_renamed); an unknown release gets the newest names."""
    out = dict(series)
    for fld, since, before in renamed:
        if version and not at_least(version, since):
            out[fld] = before
    return out


def candidates_at(series: Mapping[str, str], renamed, version: str | None) -> dict[str, tuple[str, ...]]:
    """field -> names to look for, this release's first: an image whose release is unknown still reads."""
    out = {f: (n,) for f, n in names_at(series, renamed, version).items()}
    for fld, _, before in renamed:
        out[fld] = tuple(dict.fromkeys(out[fld] + (series[fld], before)))
    return out


def names_for(engine: str, version: str | None) -> dict[str, str]:
    """The registered engine's series names in this release (Engine.metric_names)."""
    from . import get_engine  # the registry imports this module

    return get_engine(engine).metric_names(version)
