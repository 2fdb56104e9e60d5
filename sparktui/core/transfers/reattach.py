"""On start: find the transfers earlier sparktui runs left on the nodes and carry them on.

Running ones are followed to their end and verified; finished but unverified ones are verified;
the others are shown once as they ended. The TUI calls this when it opens, the CLI through
`sync model|image` (which also adopt what they find).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from .image_sync import carry_on_image
from .model_sync import carry_on_model
from .options import TransferOptions
from .runner import Outcome
from .state import ENDED, RUNNING, UNVERIFIED
from .status import list_transfers

Emit = Callable[[Any], None]


async def reattach(
    cluster, emit: Emit | None = None, opts: TransferOptions | None = None, recent: float = 24 * 3600
) -> list[Outcome]:
    """Show every transfer of the last `recent` seconds again and see the live ones through."""
    opts = opts or TransferOptions()
    emit = emit or (lambda e: None)
    records = await list_transfers(cluster)
    work = []
    for rec in records:
        if rec.state in ENDED and time.time() - rec.meta.started <= recent:
            emit(rec.progress())
        elif rec.state in (RUNNING, UNVERIFIED):
            emit(rec.progress())
            done = rec.state == UNVERIFIED
            if rec.meta.kind == "model":
                work.append(carry_on_model(cluster, rec.meta, emit, opts, already_ended=done))
            else:
                work.append(carry_on_image(cluster, rec.meta, emit, opts, already_ended=done))
    return list(await asyncio.gather(*work))
