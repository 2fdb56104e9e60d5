"""What diagnosis reports: milestones, problems and withdrawn problems, and the line helpers.

Kept apart from the Diagnoser so the TUI, the CLI and the deploy code can share the types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from . import dockerts
from ..engines import logsigns as S


@dataclass
class Milestone:
    kind: str  # container_started | dist_init_begin | dist_init_end | nccl_transport | weights_loading | ...
    line: int
    node: str | None = None
    at: float | None = None  # unix time of the line: its docker timestamp, or the `now` it was fed with
    data: dict = field(default_factory=dict)  # percent, transport, tokens, ...
    text: str = ""

    def to_json(self) -> dict:
        d = {"kind": self.kind, "line": self.line, "node": self.node, "at": self.at}
        d.update(self.data)
        d["text"] = self.text
        return d


@dataclass
class Problem:
    kind: str
    line: int
    message: str
    hint: str
    node: str | None = None
    at: float | None = None
    text: str = ""
    provisional: bool = False  # withdrawn if the engine goes on loading or serving

    phase: str | None = None  # for a log that stops: the phase and rank it stopped in
    rank: int | None = None
    cause: str = ""  # the error line that caused it, printed earlier (an engine's death: a worker's error)

    def to_json(self) -> dict:
        d = {"kind": self.kind, "line": self.line, "message": self.message, "hint": self.hint, "node": self.node}
        if self.phase:
            d.update(phase=self.phase, rank=self.rank)
        if self.cause:
            d["cause"] = self.cause
        return d


@dataclass
class ProblemCleared:
    """An earlier problem turned out harmless (the engine went on) or a suspected hang resolved."""

    problem: Problem
    reason: str


Event = Union[Milestone, Problem, ProblemCleared]


def parse_docker_ts(line: str) -> tuple[float | None, str]:
    """(unix time, rest) for a line with docker's RFC3339Nano prefix; (None, line) otherwise."""
    _, key, rest = dockerts.split(line)
    return (key / 1e9, rest) if key is not None else (None, line)


def strip_prefixes(text: str) -> str:
    """The message without the process tags, logger headers and rank tags engines put first."""
    changed = True
    while changed:
        changed = False
        for p in S.PREFIXES:
            m = p.match(text)
            if m and m.end():
                text, changed = text[m.end() :], True
    return text
