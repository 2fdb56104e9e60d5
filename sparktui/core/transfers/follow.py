"""Follow one detached transfer to its end: read its log from a byte offset, emit progress.

Reading from an offset makes following resumable: a new sparktui process starts at 0 (or where a
listing left off) and sees the same updates. The end is the rc file; a job that is gone without
one was cancelled or lost.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..state.events import TransferProgress
from . import remote
from .eta import eta
from .options import TransferOptions
from .rsync_progress import ProgressParser, RsyncUpdate, in_verifier_terms
from .state import CANCELLED, FAILED, LOST, RUNNING, UNVERIFIED, TransferMeta, describe_end, parse_poll
from .streams import StreamState, combine, stream_rows

Emit = Callable[[Any], None]


@dataclass
class Ended:
    """How the job ended, before any verification."""

    rc: int | None  # None when it ended without an exit status
    state: str  # unverified (rc 0: verification decides), failed, cancelled, lost
    message: str | None
    log_lines: list[str]  # non-progress lines of the log (errors and notes)
    last: RsyncUpdate | None
    count: int | None


def progress_of(
    meta: TransferMeta,
    state: str,
    last: RsyncUpdate | None,
    count: int | None,
    message: str | None = None,
    streams: list[StreamState] | None = None,
    main_done: bool = False,
) -> TransferProgress:
    """`last` is stream 0's latest update; `streams` the other streams of a parallel copy."""
    p = TransferProgress(
        id=meta.id,
        kind=meta.kind,
        source=meta.source,
        dest=meta.dest,
        state=state,
        total_bytes=meta.total_bytes,
        files_total=meta.total_files,
        message=message,
        elapsed=max(0.0, time.time() - meta.started),
        cipher=meta.cipher,
    )
    if streams:
        p.streams = stream_rows(last, streams, main_done)
        last = combine(last, streams, meta.total_bytes, main_done)
    if last is not None:
        p.bytes, p.percent, p.rate = last.bytes, float(last.percent), last.rate
        p.files_left = last.files_left
        p.files_done, p.files_total, p.eta = in_verifier_terms(last, meta.total_bytes, meta.total_files, p.elapsed)
    elif count is not None:
        p.bytes = count
        if meta.total_bytes:
            # the tar stream runs a little over the image's size: hold below 100 until the end
            p.percent = min(99.9, 100.0 * count / meta.total_bytes)
    return p


async def follow(
    node, meta: TransferMeta, emit: Emit | None = None, opts: TransferOptions | None = None, offset: int = 0
) -> Ended:
    """Poll the transfer on `node` (its source) until it ends; emits TransferProgress as it goes."""
    opts = opts or TransferOptions()
    emit = emit or (lambda e: None)
    parser = ProgressParser()
    count: int | None = None
    rate_probe: tuple[float, int] | None = None  # (time, bytes) for the image byte rate
    image_rate: float | None = None
    unreachable_since: float | None = None
    gone_once = False
    delay = opts.poll
    streams: list[StreamState] = []  # the other streams of a parallel copy, as last seen
    while True:
        # the node waits for news itself (long poll): an end is seen at once, not a poll later
        r = await node.run(remote.read_state(meta.id, offset, wait=opts.poll), timeout=60 + opts.poll)
        if r.exit_status in (255, 124):
            now = time.monotonic()
            unreachable_since = unreachable_since or now
            waited = now - unreachable_since
            msg = (
                f"lost contact with {meta.source} ({r.stderr.strip() or 'no answer'}); the transfer keeps "
                f"running there, retrying ({waited:.0f}/{opts.lost_contact:.0f} s)"
            )
            emit(progress_of(meta, RUNNING, parser.latest(), count, msg, streams))
            if waited >= opts.lost_contact:
                return Ended(
                    None,
                    LOST,
                    f"gave up following: {meta.source} unreachable for {waited:.0f} s; "
                    f"`sparktui sync status` shows the transfer once it answers again",
                    parser.messages,
                    parser.latest(),
                    count,
                )
            await asyncio.sleep(min(5.0, delay))
            delay = min(5.0, delay * 2)
            continue
        unreachable_since, delay = None, opts.poll
        if r.exit_status == 3:
            return Ended(
                None,
                LOST,
                f"the transfer's state directory on {meta.source} is gone",
                parser.messages,
                parser.latest(),
                count,
            )
        try:
            poll = parse_poll(r.stdout)
        except ValueError as e:
            return Ended(
                None, LOST, f"unreadable answer from {meta.source}: {e}", parser.messages, parser.latest(), count
            )
        streams = poll.streams or streams
        if poll.nbytes:
            parser.feed(poll.data)
            offset += poll.nbytes
        if poll.count is not None:
            t = time.monotonic()
            if rate_probe is not None and t > rate_probe[0] and poll.count >= rate_probe[1]:
                image_rate = (poll.count - rate_probe[1]) / (t - rate_probe[0])
            rate_probe, count = (t, poll.count), poll.count
        more = offset < poll.size
        if not more and (poll.rc is None or poll.nbytes or poll.count is not None):
            # the last read before the end too: rsync's final update (100 %) belongs to the run
            p = progress_of(
                meta,
                RUNNING,
                parser.latest(),
                count,
                streams=streams,
                main_done=poll.rc is not None or poll.main_rc is not None,
            )
            if meta.kind == "image" and image_rate is not None:
                p = replace(p, rate=image_rate)
                p.eta = eta(meta.total_bytes, count, image_rate, p.elapsed)
            emit(p)
        if poll.rc is not None and not more:
            state = CANCELLED if poll.cancelled else UNVERIFIED if poll.rc == 0 else FAILED
            msg = None if state == UNVERIFIED else describe_end(meta, state, poll.rc, "\n".join(parser.messages), None)
            return Ended(
                poll.rc, state, msg, parser.messages, combine(parser.latest(), streams, meta.total_bytes), count
            )
        if poll.rc is None and not poll.alive and not more:
            if gone_once:  # asked twice: the rc file would be there by now if the job had ended normally
                state = CANCELLED if poll.cancelled else LOST
                return Ended(
                    None, state, describe_end(meta, state, None, "", None), parser.messages, parser.latest(), count
                )
            gone_once = True
            await asyncio.sleep(opts.poll)  # give the job's wrapper time to write its rc
            continue
        # no sleep here: the next read waits on the node (above)
