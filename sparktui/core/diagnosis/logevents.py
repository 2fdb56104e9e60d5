"""What diagnosis reports: milestones, problems and withdrawn problems, and the line helpers.

Kept apart from the Diagnoser so the TUI, the CLI and the deploy code can share the types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from . import dockerts
from ..engines import logsigns as S
from ..state.states import MilestoneKind, Phase, ProblemKind


@dataclass
class Milestone:
    kind: MilestoneKind
    line: int
    node: str | None = None
    at: float | None = None  # unix time of the line: its docker timestamp, or the `now` it was fed with
    data: dict = field(default_factory=dict)  # percent, transport, tokens, ...
    text: str = ""

    def __post_init__(self) -> None:
        self.kind = MilestoneKind(self.kind)  # a saved word from before a rename reads as the kind it names now

    def to_json(self) -> dict:
        d = {"kind": self.kind, "line": self.line, "node": self.node, "at": self.at}
        d.update(self.data)
        d["text"] = self.text
        return d


@dataclass
class Problem:
    kind: ProblemKind | str  # a plain word only for an engine's own sign (Engine.signs)
    line: int
    message: str
    hint: str
    node: str | None = None
    at: float | None = None
    text: str = ""
    provisional: bool = False  # withdrawn if the engine goes on loading or serving

    phase: Phase | None = None  # for a log that stops: the phase and rank it stopped in
    rank: int | None = None
    cause: str = ""  # the error line that caused it, printed earlier (an engine's death: a worker's error)

    def __post_init__(self) -> None:
        self.kind = problem_kind(self.kind)
        self.phase = Phase(self.phase) if self.phase is not None else None

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


def problem_kind(word: str) -> ProblemKind | str:
    """The member a known word names; an engine's own kind stays its word."""
    try:
        return ProblemKind(word)
    except ValueError:
        return word


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
