"""Widget ids from node names: a node may be called `spark.1`, an id may not hold a dot."""

from __future__ import annotations

import re

_BAD = re.compile(r"[^A-Za-z0-9_-]")


def widget_id(prefix: str, name: str) -> str:
    """`prefix-name` with every character an id cannot hold written as _XX (its hex code), so two
    different names never share an id."""
    return f"{prefix}-" + _BAD.sub(lambda m: f"_{ord(m.group()):02x}", name.replace("_", "__"))
