"""A ready endpoint while it serves: its metrics read, and whether it still makes progress.

- `metrics` — an engine's Prometheus /metrics parsed into what the serving view shows (`Scrape`, `Serving`)
- `liveness` — `Liveness`: the `wedged` judgement of a ready endpoint that stopped generating
"""
