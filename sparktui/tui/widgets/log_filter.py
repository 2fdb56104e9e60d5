"""What the log filter box means: `node:NAME` (or `node:a,b`) picks nodes, the other words are
one case-insensitive phrase that a line must contain."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LogFilter:
    text: str = ""  # as typed (trimmed)
    phrase: str = ""  # lower case; "" = every line
    nodes: tuple[str, ...] = ()  # lower case; () = every node

    @classmethod
    def parse(cls, text: str) -> "LogFilter":
        nodes: list[str] = []
        words: list[str] = []
        for word in text.split():
            if word.lower().startswith("node:"):
                nodes += [n for n in word[5:].lower().split(",") if n]
            else:
                words.append(word)
        return cls(text.strip(), " ".join(words).lower(), tuple(nodes))

    @property
    def empty(self) -> bool:
        return not self.phrase and not self.nodes

    @property
    def words(self) -> str:
        return self.phrase

    def match(self, text: str) -> bool:
        return self.phrase in text.lower()

    def node_indexes(self, names: list[str]) -> set[int] | None:
        """Indexes of the named nodes among `names`; None when the filter names none."""
        if not self.nodes:
            return None
        return {i for i, n in enumerate(names) if n.lower() in self.nodes}

    def unknown_nodes(self, names: list[str]) -> list[str]:
        known = {n.lower() for n in names}
        return [n for n in self.nodes if n not in known]
