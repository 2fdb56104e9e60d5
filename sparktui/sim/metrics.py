"""What the simulated engine has served, kept as the engine's own Prometheus metrics and served on /metrics.

Counters and histograms move as requests are served (tokens, finished requests, TTFT, inter-token latency,
per-request TPOT, end-to-end and queue time, all in engine seconds); the gauges (running, waiting, KV-cache
use) are read live from the engine when scraped. Rendered in the text format prometheus_client writes
(version 0.0.4): HELP/TYPE lines, counters as NAME_total plus NAME_created, histograms as cumulative
_bucket{le=...} series ending in +Inf, then _count and _sum. An engine whose page prometheus_client's
MultiProcessCollector writes (metrics_catalog.MULTIPROCESS) shows what that collector merges from its files
instead: only families with a touched series, no _created, a histogram's _sum ahead of its buckets and _count.
Names per release: metrics_catalog.py.
"""

from __future__ import annotations

import bisect
import time
from typing import Callable

from .metrics_catalog import FIXED_LABELS, MULTIPROCESS, Spec, catalog

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
FINISH_REASONS = ("stop", "length", "abort")  # vllm/v1/engine/__init__.py FinishReason, pre-created as upstream


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.bounds = list(buckets)
        self.counts = [0] * (len(buckets) + 1)  # the last is +Inf
        self.sum = 0.0
        self.created = time.time()

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value


class EngineMetrics:
    """The metric families of one engine release, fed by the HTTP side as it serves."""

    def __init__(
        self, kind: str, version: str, model_name: str, gauges: Callable[[], dict[str, float]] | None = None
    ) -> None:
        self.kind = kind
        self.specs, scopes = catalog(kind, version)
        fixed = {
            "model_name": model_name,
            "engine": "0",
            "engine_type": "unified",
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
            **FIXED_LABELS.get(kind, {}),
        }
        self.multiprocess = kind in MULTIPROCESS
        self.labels = {scope: tuple((n, fixed[n]) for n in names) for scope, names in scopes.items()}
        self.gauges = gauges or (lambda: {})
        self.counters: dict[tuple[str, tuple[str, ...]], list[float]] = {}  # -> [value, created]
        self.hists: dict[tuple[str, tuple[str, ...]], _Histogram] = {}
        self.by_role = {s.role: s for s in self.specs}
        # vLLM creates every series at start (create_metric_per_engine); SGLang's labelled counters and
        # histograms show no sample until the first request sets their labels
        for s in self.specs if kind == "vllm" else ():
            if s.kind == "counter" and "finished_reason" in s.extra:
                for r in FINISH_REASONS:
                    self.counters[(s.role, (r,))] = [0.0, time.time()]
            elif s.kind == "counter" and not s.extra:
                self.counters[(s.role, ())] = [0.0, time.time()]
            elif s.kind == "histogram" and not s.extra:
                self.hists[(s.role, ())] = _Histogram(s.buckets)

    def _extra(self, s: Spec, streaming: bool, finish: str) -> tuple[str, ...]:
        values = {"is_streaming": "true" if streaming else "false", "finished_reason": finish}
        return tuple(values[e] for e in s.extra)

    def inc(self, role: str, amount: float = 1.0, streaming: bool = False, finish: str = "stop") -> None:
        s = self.by_role.get(role)
        if s is None:
            return  # this release has no such metric
        key = (role, self._extra(s, streaming, finish))
        self.counters.setdefault(key, [0.0, time.time()])[0] += amount

    def observe(self, role: str, value: float, streaming: bool = False) -> None:
        s = self.by_role.get(role)
        if s is None:
            return
        key = (role, self._extra(s, streaming, "stop"))
        if key not in self.hists:
            self.hists[key] = _Histogram(s.buckets)
        self.hists[key].observe(value)

    def value(self, role: str) -> float:
        """A counter's total over its label values (for tests and log lines)."""
        return sum(v[0] for (r, _), v in self.counters.items() if r == role)

    def _series(self, table: dict) -> list:
        """prometheus_client's registry writes a family's series sorted by label values; the multiprocess
        collector in the order they were first touched (their order in its file)."""
        return list(table.items()) if self.multiprocess else sorted(table.items(), key=lambda kv: kv[0])

    def render(self) -> str:
        out: list[str] = []
        live = self.gauges()
        for s in self.specs:
            base = s.name[: -len("_total")] if s.kind == "counter" and s.name.endswith("_total") else s.name
            shown = base + "_total" if s.kind == "counter" else base
            if self.multiprocess and not any(role == s.role for role, _ in [*self.counters, *self.hists]):
                continue  # no file holds a sample of it yet, so the collector knows no such family
            out.append(f"# HELP {shown} {_escape_help(s.help)}")
            out.append(f"# TYPE {shown} {s.kind}")
            fixed = self.labels[s.scope]
            created: list[str] = []
            if s.kind == "gauge":
                out.append(f"{base}{_labels(fixed)} {_num(live.get(s.role, 0.0))}")
            elif s.kind == "counter":
                for (role, extra), (value, ts) in self._series(self.counters):
                    if role == s.role:
                        lab = _labels(fixed + tuple(zip(s.extra, extra)))
                        out.append(f"{base}_total{lab} {_num(value)}")
                        created.append(f"{base}_created{lab} {_num(ts)}")
            else:
                for (role, extra), h in self._series(self.hists):
                    if role != s.role:
                        continue
                    pairs = fixed + tuple(zip(s.extra, extra))
                    total_line = f"{base}_sum{_labels(pairs)} {_num(h.sum)}"
                    if self.multiprocess:  # _sum is a file's own value; the buckets and _count are summed up after
                        out.append(total_line)
                    acc = 0
                    for bound, n in zip([*h.bounds, float("inf")], h.counts):
                        acc += n
                        out.append(f"{base}_bucket{_labels(pairs + (('le', _num(bound)),))} {_num(float(acc))}")
                    out.append(f"{base}_count{_labels(pairs)} {_num(float(acc))}")
                    if not self.multiprocess:
                        out.append(total_line)
                        created.append(f"{base}_created{_labels(pairs)} {_num(h.created)}")
            if self.multiprocess:
                created = []  # the files keep values only, no creation times
            if created:  # prometheus_client writes these as a gauge family of their own
                out.append(f"# HELP {base}_created {_escape_help(s.help)}")
                out.append(f"# TYPE {base}_created gauge")
                out.extend(created)
        return "\n".join(out) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _labels(pairs: tuple[tuple[str, str], ...]) -> str:
    if not pairs:
        return ""
    pairs = tuple(sorted(pairs))  # prometheus_client writes a sample's labels sorted by name
    esc = (str(v).replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"") for _, v in pairs)
    return "{" + ",".join(f'{k}="{v}"' for (k, _), v in zip(pairs, esc)) + "}"


def _num(v: float) -> str:
    """A float as prometheus_client's floatToGoString writes it (Go switches to exponents sooner)."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    s = repr(float(v))
    dot = s.find(".")
    if v > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s
