"""An engine's Prometheus /metrics, read into what the serving view shows.

Pure: `parse(text, engine, version, at)` gives one Scrape (exposition text parsed with
prometheus_client's own parser, never by hand); `Serving` keeps the recent scrapes of one
deployment and derives tokens/s from counter deltas and TTFT / inter-token latency quantiles from
histogram bucket deltas (over the last minute when it has two scrapes, since start-up otherwise).

With tensor parallelism every rank exports the same scheduler gauges (SGLang labels them tp_rank),
so only rank 0 of each pipeline/data-parallel group is counted; engines (vLLM's `engine` label,
SGLang's dp_rank) add up.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from dataclasses import dataclass, field

from ..engines import find_engine
from ..engines.metricnames import KINDS

WINDOW_S = 60.0  # rates and quantiles over about the last minute
KEEP_S = 600.0  # sparklines: the last ten minutes
MAX_SCRAPES = 2000  # bounded memory whatever the poll interval
_NON_LEADER = {"tp_rank", "pp_rank"}  # labels whose non-zero values repeat rank 0's numbers


@dataclass
class Scrape:
    at: float
    values: dict[str, float] = field(default_factory=dict)  # gauges and counters, by field
    buckets: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # histogram: (le, cumulative count)
    missing: list[str] = field(default_factory=list)  # fields this engine did not export
    error: str | None = None  # the text did not parse (the view counts it and goes on)


def _leader(labels: dict[str, str]) -> bool:
    return all(labels.get(k, "0") in ("0", "") for k in _NON_LEADER)


_SAMPLE_SUFFIXES = ("_bucket",)  # of a histogram only the buckets are read (_count and _sum are not)
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")  # a metric name (the exposition format's grammar)


def _relevant(text: str, want) -> str:
    """The lines of the families read here (their TYPE lines and samples), for prometheus_client's parser.

    Parsing is most of what a scrape costs (bench/serving_overhead.py), and an engine's page is mostly series
    the view never reads (request-size histograms, `_created` gauges, ...): only names are compared here,
    every kept line is still parsed by prometheus_client."""
    fams = set(want) | {n.removesuffix("_total") for n in want} | {n + "_total" for n in want}
    out = []
    for line in text.split("\n"):
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE" and parts[2] in fams:
                out.append(line)
            continue
        name = line.split("{", 1)[0].split(None, 1)[0] if line.strip() else ""
        if name and not _NAME.fullmatch(name):
            out.append(line)  # not a sample line: the parser says what is wrong with it (counted, shown)
        elif name in fams or any(name.endswith(x) and name[: -len(x)] in fams for x in _SAMPLE_SUFFIXES):
            out.append(line)
    return "\n".join(out) + "\n"


def parse(text: str, engine: str, version: str | None = None, at: float | None = None) -> Scrape:
    """One scrape; never raises on bad text: it says so in .error."""
    from prometheus_client.parser import text_string_to_metric_families

    s = Scrape(time.time() if at is None else at)
    eng = find_engine(engine)
    names = eng.metric_candidates(version) if eng else {}
    want = {n: f for f, ns in names.items() for n in ns}
    vals: dict[str, float] = {}  # by series name: gauges and counters, leader ranks summed (kv: max)
    hist: dict[str, dict[float, float]] = {}  # by series name: le -> cumulative count
    try:
        for fam in text_string_to_metric_families(_relevant(text, want)):
            for smp in fam.samples:
                name = smp.name
                base = name[:-7] if name.endswith("_bucket") else name
                if base not in want or not _leader(smp.labels) or not math.isfinite(smp.value):
                    continue  # NaN or an infinite count says nothing (and would not survive --json)
                fld = want[base]
                if KINDS[fld] == "histogram":
                    if name.endswith("_bucket"):
                        le = float(smp.labels.get("le", "inf"))
                        h = hist.setdefault(base, {})
                        h[le] = h.get(le, 0.0) + smp.value
                elif fld == "kv_cache_usage":
                    vals[base] = max(vals.get(base, 0.0), smp.value)  # the fullest engine is the one that refuses
                else:
                    vals[base] = vals.get(base, 0.0) + smp.value
    except Exception as e:  # noqa: BLE001 - remote text: any parse failure is reported, not raised
        s.error = f"{type(e).__name__}: {e}"[:200]
        return s
    for fld, ns in names.items():  # this release's name first, then the others it may still export
        base = next((n for n in ns if n in vals or n in hist), None)
        if base is None:
            s.missing.append(fld)
        elif base in hist:
            s.buckets[fld] = sorted(hist[base].items())
        else:
            s.values[fld] = vals[base]
    return s


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile on cumulative (le, count) buckets: linear inside the bucket."""
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if math.isinf(le):
                return prev_le  # past the last finite bound: its bound is all we know
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def _delta(new: list[tuple[float, float]], old: list[tuple[float, float]] | None) -> list[tuple[float, float]]:
    if not old:
        return new
    before = dict(old)
    out = [(le, c - before.get(le, 0.0)) for le, c in new]
    if any(c < 0 for _, c in out):
        return new  # the engine restarted: its counters began again
    return out


class Serving:
    """The recent scrapes of one deployment, and what they say now."""

    def __init__(self, engine: str, version: str | None = None, window: float = WINDOW_S, keep: float = KEEP_S):
        self.engine, self.version = engine, version
        self.window, self.keep = window, keep
        self.scrapes: deque[Scrape] = deque(maxlen=MAX_SCRAPES)
        self.errors = 0  # scrapes whose text did not parse
        self.last_error: str | None = None

    def add(self, s: Scrape) -> None:
        if s.error:
            self.errors += 1
            self.last_error = s.error
            return
        self.scrapes.append(s)
        while self.scrapes and s.at - self.scrapes[0].at > self.keep:
            self.scrapes.popleft()

    def _base(self, now: Scrape) -> Scrape | None:
        """The oldest scrape inside the window before `now`, else the last one before it."""
        before = [s for s in self.scrapes if s.at < now.at]
        inside = [s for s in before if now.at - s.at <= self.window]
        return inside[0] if inside else (before[-1] if before else None)

    def rate(self, fld: str, now: Scrape | None = None) -> float | None:
        now = now or (self.scrapes[-1] if self.scrapes else None)
        base = self._base(now) if now else None
        if now is None or base is None or fld not in now.values or fld not in base.values:
            return None
        dt = now.at - base.at
        dv = now.values[fld] - base.values[fld]
        return dv / dt if dt > 0 and dv >= 0 else None  # dv < 0: the engine restarted

    def latency(self, fld: str, q: float) -> float | None:
        if not self.scrapes or fld not in self.scrapes[-1].buckets:
            return None
        now = self.scrapes[-1]
        base = self._base(now)
        return quantile(q, _delta(now.buckets[fld], base.buckets.get(fld) if base else None))

    def series(self, fld: str) -> list[float]:
        """Per-scrape values for a sparkline: a rate for counters, the value for gauges."""
        out: list[float] = []
        prev = None
        for s in self.scrapes:
            if fld in s.values:
                if KINDS[fld] == "counter":
                    if prev is not None and s.at > prev.at and fld in prev.values:
                        out.append(max(0.0, (s.values[fld] - prev.values[fld]) / (s.at - prev.at)))
                    prev = s
                else:
                    out.append(s.values[fld])
        return out

    def to_json(self) -> dict:
        """The keys of `sparktui metrics --json`."""
        last = self.scrapes[-1] if self.scrapes else None
        v = last.values if last else {}

        def r(x: float | None, nd: int = 3) -> float | None:
            return None if x is None else round(x, nd)

        return {
            "engine": self.engine,
            "at": last.at if last else None,
            "running": v.get("running"),
            "waiting": v.get("waiting"),
            "kv_cache_usage": r(v.get("kv_cache_usage"), 4),
            "generation_tokens_per_s": r(self.rate("generation_tokens"), 2),
            "prompt_tokens_per_s": r(self.rate("prompt_tokens"), 2),
            "ttft_p50_s": r(self.latency("ttft", 0.5), 4),
            "ttft_p90_s": r(self.latency("ttft", 0.9), 4),
            "itl_p50_s": r(self.latency("itl", 0.5), 4),
            "itl_p90_s": r(self.latency("itl", 0.9), 4),
            "generation_tokens_total": v.get("generation_tokens"),
            "missing": list(last.missing) if last else [],
            "scrapes": len(self.scrapes),
            "parse_errors": self.errors,
            "last_parse_error": self.last_error,
        }
