"""The serving block of the launch pane: what the engine's /metrics say, with sparklines. Pure."""

from __future__ import annotations

from textual.content import Content

BARS = "▁▂▃▄▅▆▇█"
WIDTH = 30  # sparkline cells: the most recent scrapes


def sparkline(values: list[float], width: int = WIDTH, top: float | None = None) -> str:
    """One cell per value (the last `width`), scaled to the largest (or to `top`, e.g. 1 for a share)."""
    vals = [max(0.0, v) for v in values[-width:]]
    if not vals:
        return ""
    hi = top if top is not None else max(vals)
    if hi <= 0:
        return BARS[0] * len(vals)
    return "".join(BARS[min(len(BARS) - 1, int(v / hi * (len(BARS) - 1) + 0.5))] for v in vals)


def _n(v, unit: str = "", nd: int = 0) -> str:
    return "—" if v is None else f"{v:.{nd}f}{unit}"


def _ms(v) -> str:
    return "—" if v is None else f"{v * 1000:.0f} ms"


def serving_block(stats: dict, series: dict, unavailable: str | None = None, cannot_tell: str | None = None) -> Content:
    """Three to five lines: tokens/s, requests and KV cache, latency quantiles; a missing source once; and
    when a probe went unanswered that these metrics cannot judge, that liveness is unknown and why."""
    unknown = Content.assemble(("liveness unknown: ", "bold $warning"), (cannot_tell or "", "$warning"))
    if unavailable and not stats.get("scrapes"):
        head = Content.assemble(("serving ", "bold"), (f"no metrics: {unavailable}", "$warning"))
        return Content("\n").join([head, unknown]) if cannot_tell else head
    gen, prompt = stats.get("generation_tokens_per_s"), stats.get("prompt_tokens_per_s")
    kv = stats.get("kv_cache_usage")
    lines = [
        Content.assemble(
            ("gen ", "bold"),
            f"{_n(gen, ' tok/s', 1):>13} ",
            (sparkline(series.get("generation_tokens", [])), "$success"),
            "  ",
            ("prompt ", "bold"),
            _n(prompt, " tok/s", 1),
        ),
        Content.assemble(
            ("reqs ", "bold"),
            f"{_n(stats.get('running'))} running · {_n(stats.get('waiting'))} waiting  ",
            ("KV ", "bold"),
            f"{_n(None if kv is None else kv * 100, ' %')} ",
            (sparkline(series.get("kv_cache_usage", []), top=1.0), "$accent"),
        ),
        Content.assemble(
            ("TTFT ", "bold"),
            f"p50 {_ms(stats.get('ttft_p50_s'))} p90 {_ms(stats.get('ttft_p90_s'))}  ",
            ("ITL ", "bold"),
            f"p50 {_ms(stats.get('itl_p50_s'))} p90 {_ms(stats.get('itl_p90_s'))}",
        ),
    ]
    notes = []
    if stats.get("missing"):
        notes.append("not exported: " + ", ".join(stats["missing"]))
    if stats.get("parse_errors"):
        notes.append(f"{stats['parse_errors']} unreadable scrape(s): {stats.get('last_parse_error')}")
    if unavailable:
        notes.append(f"metrics lost: {unavailable}")
    if notes:
        lines.append(Content.assemble(("; ".join(notes), "$text-muted")))
    if cannot_tell:
        lines.append(unknown)
    return Content("\n").join(lines)
