"""Which demo node answers at an address or name: read from the demo's demo.json (ssh, ssh-keyscan)."""

from __future__ import annotations

import json

from ..hardware import demo_root


def table() -> dict[str, dict]:
    """address or host name -> {"name", "port", "host_key"} for every node of the demo."""
    with open(demo_root() / "demo.json", encoding="utf-8") as f:
        demo = json.load(f)
    out: dict[str, dict] = {}
    for n in demo["nodes"]:
        entry = {"name": n["name"], "port": n["port"], "host_key": n["host_key"]}
        for key in [n["name"], *n["addresses"].values()]:
            out[key] = entry
    return out
