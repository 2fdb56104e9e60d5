"""The per-step collective between nodes, over the links the ranks already hold.

Tensor parallelism all-reduces inside every layer of every step, so no rank gets ahead of the slowest one.
The head's engine plays that with one round trip per step to every remote node: it sends `step` and waits
for `step_ok` on the mesh's queue links (native vLLM, SGLang) or vLLM's Ray worker links. The remote side
answers in `answer_steps`. A peer that stops answering while its link stays up -- a paused container: its
kernel still takes the bytes, its process answers nothing -- stalls every step of the head while the head's
HTTP server goes on answering /health; a link that closes is a peer gone (NCCL's "remote process exited").

What then ends the stall is each engine's own timeout (the engines decide, see vllm_server / sglang_server);
`stalled()` tells them when it passed. The `collective-timeout` scenario makes the step exchange stop
mid-serving without a frozen peer: the collective itself hangs, and torch's NCCL watchdog ends it.
"""

from __future__ import annotations

import asyncio
import json
import time

from . import clock, wire

TORCH_NCCL_TIMEOUT_S = 600.0  # torch's default process-group timeout for NCCL (torch/distributed/constants.py)
SCENARIO_HANG_AFTER_S = 20.0  # engine seconds of stepping (serving under load) before the scenario's hang
BUSY_GAP_S = 1.0  # steps closer than this (engine seconds) count as one stretch of serving


class PeerLost(ConnectionError):
    """A remote rank's link closed: the step can never complete."""


async def answer_steps(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A remote node's end: answer each step until the link closes (then return)."""
    while (msg := await wire.recv(reader)) is not None:
        if msg.get("op") == "step":
            try:
                await wire.send(writer, {"op": "step_ok", "seq": msg.get("seq")})
            except (ConnectionError, OSError):
                return


class StepSync:
    """The head's side: one exchange with every peer per engine step, shared by the requests of that step."""

    def __init__(self, scenario_hang: bool | None = None) -> None:
        self.seq = 0
        self.lost = asyncio.Event()
        self.hung = False  # the scenario's collective hang is under way
        self.dead = False  # the engine gave up (abort): every step fails from now on
        self.waiting_since: float | None = None  # monotonic start of the exchange in flight
        self.busy_s = 0.0  # engine seconds spent stepping so far (the scenario's trigger)
        self._last_step: float | None = None
        self._scenario = clock.active("collective-timeout") if scenario_hang is None else scenario_hang
        self._writers: list[asyncio.StreamWriter] = []
        self._readers: list[asyncio.Task] = []
        self._pending: dict[int, tuple[asyncio.Future, set[int]]] = {}
        self._inflight: asyncio.Future | None = None
        self._moved = asyncio.Event()  # set whenever an exchange starts or ends (stall watchers re-arm on it)

    @property
    def peers(self) -> int:
        return len(self._writers)

    def add(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A link to one remote node (its far end runs answer_steps)."""
        index = len(self._writers)
        self._writers.append(writer)
        self._readers.append(asyncio.ensure_future(self._read(index, reader)))

    async def _read(self, index: int, reader: asyncio.StreamReader) -> None:
        while (msg := await wire.recv(reader)) is not None:
            if msg.get("op") != "step_ok":
                continue
            entry = self._pending.get(msg.get("seq"))  # type: ignore[arg-type]
            if entry is not None:
                fut, answered = entry
                answered.add(index)
                if len(answered) == len(self._writers) and not fut.done():
                    fut.set_result(None)
        self.lost.set()
        for fut, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(PeerLost("a remote rank's link closed"))

    async def step(self) -> None:
        """Wait for this step's collective: joins the exchange in flight, else starts one. PeerLost when a
        peer is gone or the engine died."""
        if not self._writers:
            return
        if self.lost.is_set() or self.dead:
            raise PeerLost("a remote rank's link closed" if self.lost.is_set() else "the engine died")
        now = time.monotonic()
        if self._last_step is not None and (now - self._last_step) * clock.speed() < BUSY_GAP_S:
            self.busy_s += (now - self._last_step) * clock.speed()
        self._last_step = now
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(self._exchange())
        await asyncio.shield(self._inflight)

    async def settled(self) -> None:
        """Returns once no exchange is in flight: a scheduler admits new requests between steps, so a
        request that arrives during a stall stays waiting."""
        while self._inflight is not None and not self._inflight.done():
            try:
                await asyncio.shield(self._inflight)
            except PeerLost:
                return

    async def _exchange(self) -> None:
        self.seq += 1
        seq = self.seq
        fut = asyncio.get_running_loop().create_future()
        self._pending[seq] = (fut, set())
        self.waiting_since = time.monotonic()
        self._signal()
        try:
            if self._scenario and self.busy_s >= SCENARIO_HANG_AFTER_S:
                self.hung = True  # the all-reduce never completes on the GPUs: nothing goes out
                await fut  # until abort()
            line = json.dumps({"op": "step", "seq": seq}, separators=(",", ":")).encode() + b"\n"
            for w in self._writers:
                try:
                    w.write(line)  # no drain: a paused peer's buffers fill only after many unanswered steps
                except (ConnectionError, OSError, RuntimeError):
                    pass
            await fut
        finally:
            self._pending.pop(seq, None)
            self.waiting_since = None
            self._signal()

    def _signal(self) -> None:
        self._moved.set()
        self._moved = asyncio.Event()

    def stalled_for(self) -> float:
        """Engine seconds the exchange in flight has waited (0 when none is)."""
        if self.waiting_since is None:
            return 0.0
        return (time.monotonic() - self.waiting_since) * clock.speed()

    async def stalled(self, limit_s: float, hang_limit_s: float = TORCH_NCCL_TIMEOUT_S) -> str:
        """Returns once one exchange has waited past the engine's step timeout `limit_s` (engine seconds):
        "frozen" (a peer stopped answering), or "hang" after `hang_limit_s` in the scenario's hang, where
        torch's NCCL watchdog is what notices."""
        while True:
            limit = hang_limit_s if self.hung else limit_s
            left = limit - self.stalled_for()
            if self.waiting_since is not None and left <= 0:
                return "hang" if self.hung else "frozen"
            moved = self._moved
            try:  # until this exchange's deadline, or the next start or end of one
                deadline = None if self.waiting_since is None else max(0.01, clock.scaled(left))
                await asyncio.wait_for(moved.wait(), deadline)
            except asyncio.TimeoutError:
                pass

    def abort(self) -> None:
        """The engine died: the steps waiting (and any later one) fail, so their requests end with an error."""
        self.dead = True
        for fut, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(PeerLost("the engine died"))

    def close(self) -> None:
        for t in self._readers:
            t.cancel()
        for w in self._writers:
            wire.close(w)
