"""YAML with positions: compose a document into nodes, read checked values, point errors at them.

yaml.compose keeps each node's start_mark, so any error can name the key or value at fault.
Marks are 0-based; everything reported here is 1-based (what editors show).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import fields
from typing import Callable

import yaml

from .secrets import shorten

# Bounds for hand-written YAML: far above any real config or recipe, far below what hurts.
MAX_BYTES = 1 << 20  # file size
MAX_DEPTH = 48  # nesting of mappings and lists
MAX_NODES = 100_000  # nodes after expanding every alias (a "billion laughs" stops here, at once)
MAX_VALUE = 4096  # characters in one value (PATH_MAX; a longer host, name or path is a mistake)
# Characters that make text lie about itself: C0/C1 controls (but tab) and the bidi overrides.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
STD_TAG = "tag:yaml.org,2002:"
NULL, STR, INT, FLOAT, BOOL, MERGE = (STD_TAG + t for t in ("null", "str", "int", "float", "bool", "merge"))
EMPTY = yaml.ScalarNode(NULL, "")  # stands for a key that is absent


class ConfigError(Exception):
    """A config problem at FILE:LINE:COL; str() is the full one-line message (line 0 = no position)."""

    def __init__(self, file: str, line: int, col: int, what: str, expected: str = ""):
        # whatever a message quotes (a key, a choice, a path) is cut to a readable length
        what, expected, file = shorten(what, 300), shorten(expected, 300), shorten(file, 200)
        self.file, self.line, self.col, self.what, self.expected = file, line, col, what, expected
        tail = f" ({expected})" if expected else ""
        where = f"{file}:{line}:{col}" if line else file
        super().__init__(f"{where}: {what}{tail}")


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """A hint naming the closest choice, or listing them all when nothing is close."""
    same = [c for c in choices if c.casefold() == word.casefold()]
    if same:  # `Spark2` for `spark2`: difflib would find it too, but not say why it was refused
        return f"did you mean '{same[0]}'? names are case-sensitive"
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return "expected one of: " + ", ".join(choices)


def unknown_names(what: str, bad: list[str], known: list[str]) -> str:
    """`unknown node 'Spark2' (did you mean 'spark2'? ...)`, or the names known when none is close."""
    hints = [did_you_mean(b, known) for b in bad]
    close = [h for h in hints if h.startswith("did you mean")]
    names = ", ".join(f"'{shorten(b, 80)}'" for b in bad)
    tail = "".join(f"{h}; " for h in close)
    return f"unknown {what}{'s' if len(bad) > 1 else ''} {names} ({tail}{what}s: {', '.join(known)})"


def kind(node: yaml.Node) -> str:
    """How a node reads in an error: 'a list', 'a mapping', 'an integer', ..."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return {NULL: "empty", INT: "an integer", FLOAT: "a number", BOOL: "a boolean"}.get(node.tag, "text")


def at(node: yaml.Node) -> str:
    """LINE:COL of a node, for hints that point at a second place."""
    return f"{node.start_mark.line + 1}:{node.start_mark.column + 1}"


Items = dict[str, tuple[yaml.Node, yaml.Node]]  # key -> (key node, value node)


class Source:
    """One YAML text being read: knows its file name, reads checked values, builds errors at nodes."""

    def __init__(self, text: str, filename: str):
        self.doc, self.filename = text, filename
        self._loader = yaml.SafeLoader("")  # only used to build scalars and flatten merge keys
        self._read: dict[int, Items] = {}  # mappings already read, by node id (the nodes live as long as self)

    def error(self, where: yaml.Node | yaml.Mark | None, what: str, expected: str = "") -> ConfigError:
        mark = where.start_mark if isinstance(where, yaml.Node) else where
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        if expected and not expected.startswith(("expected", "did you mean")):
            expected = "expected " + expected  # callers name the thing; the message says it was expected
        return ConfigError(self.filename, line, col, what, expected)

    def _bounded(self) -> None:
        """Refuse what would exhaust the composer before composing: size, nesting depth (it recurses)."""
        if len(self.doc) > MAX_BYTES:
            raise ConfigError(
                self.filename,
                0,
                0,
                f"the file is {len(self.doc)} characters long",
                f"expected at most {MAX_BYTES} (1 MiB)",
            )
        depth = 0
        for tok in yaml.scan(self.doc, Loader=yaml.SafeLoader):  # the scanner is iterative: safe on any input
            if isinstance(
                tok,
                (
                    yaml.BlockMappingStartToken,
                    yaml.BlockSequenceStartToken,
                    yaml.FlowMappingStartToken,
                    yaml.FlowSequenceStartToken,
                ),
            ):
                depth += 1
                if depth > MAX_DEPTH:
                    raise self.error(tok.start_mark, f"nesting deeper than {MAX_DEPTH} levels", "a flatter document")
            elif isinstance(tok, (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)):
                depth -= 1

    def _expanded(self, root: yaml.Node) -> None:
        """Count nodes as if every alias were copied out; stop past MAX_NODES (alias bombs)."""
        sizes: dict[int, int] = {}

        def size(node: yaml.Node) -> int:
            if id(node) in sizes:
                return sizes[id(node)]
            sizes[id(node)] = 1  # a node seen again while inside itself (a recursive alias) counts once
            n = 1
            if isinstance(node, yaml.SequenceNode):
                n += sum(size(x) for x in node.value)
            elif isinstance(node, yaml.MappingNode):
                n += sum(size(k) + size(v) for k, v in node.value)
            if n > MAX_NODES:
                raise self.error(node, f"aliases expand to more than {MAX_NODES} values", "fewer or no aliases")
            sizes[id(node)] = n
            return n

        size(root)

    def compose(self) -> yaml.Node | None:
        """The document's root node (None for an empty file); YAML syntax errors become ConfigErrors.

        Bounded: file size, nesting depth and the size after alias expansion are checked first."""
        try:
            self._bounded()
            root = yaml.compose(self.doc, Loader=yaml.SafeLoader)
            if root is not None:
                self._expanded(root)
            return root
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            expected = "valid YAML"
            if e.context:
                c = e.context_mark
                expected += f"; {e.context}" + (f" at {c.line + 1}:{c.column + 1}" if c and c is not mark else "")
            problem = (e.problem or e.context or "").removeprefix("but ")  # "but found another document"
            raise self.error(mark, f"YAML syntax error: {problem}", expected) from None
        except yaml.YAMLError as e:  # reader errors (control characters) carry a position, not a mark
            pos = getattr(e, "position", 0)
            line = self.doc.count("\n", 0, pos)
            mark = yaml.Mark(self.filename, pos, line, pos - (self.doc.rfind("\n", 0, pos) + 1), None, None)
            raise self.error(mark, f"YAML error: {getattr(e, 'reason', e)}", "printable YAML text") from None

    # --- mappings -----------------------------------------------------------------------------

    def mapping(self, node: yaml.Node, what: str, shape: str = "key: value") -> Items:
        """The mapping's entries; rejects non-mappings, non-text keys and duplicate keys.

        Merge keys (<<: *anchor) are honoured: the mapping's own keys win, as in YAML.
        """
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} is {kind(node)}", f"expected a mapping of {shape}")
        if id(node) in self._read:  # merging twice would see merged keys as duplicates
            return self._read[id(node)]
        seen: dict[str, yaml.Node] = {}
        for k, _ in node.value:  # duplicates are checked before merging so merge overrides stay legal
            if k.tag == MERGE:
                continue
            if not isinstance(k, yaml.ScalarNode) or k.tag == NULL:
                raise self.error(k, f"a key in {what} is {kind(k)}", "a plain name as key")
            if k.value in seen:
                raise self.error(
                    k, f"duplicate key '{k.value}' in {what}", f"each key once; first at {at(seen[k.value])}"
                )
            seen[k.value] = k
        try:
            self._loader.flatten_mapping(node)
        except yaml.MarkedYAMLError as e:
            raise self.error(e.problem_mark, f"bad merge in {what}: {e.problem}", "<<: *anchor of a mapping") from None
        for k, v in node.value:
            if v.tag == NULL and v.start_mark.index == v.end_mark.index:
                v.start_mark = k.start_mark  # "key:" with nothing after it: point at the key, not past the colon
        self._read[id(node)] = items = {k.value: (k, v) for k, v in node.value}
        return items

    def check_keys(self, items: Items, allowed: list[str], what: str) -> None:
        """Unknown keys are errors with a did-you-mean, so a typo never silently falls back to a default."""
        for key, (knode, _) in items.items():
            if key not in allowed:
                raise self.error(knode, f"unknown key '{key}' in {what}", did_you_mean(key, allowed))

    def require(self, node: yaml.Node, items: Items, required: dict[str, str], what: str) -> None:
        """Missing required keys (key -> what it should hold) are reported at the mapping that lacks them."""
        for key, expected in required.items():
            if key not in items or items[key][1].tag == NULL:
                raise self.error(node, f"{what} lacks '{key}'", expected)

    def section(
        self, cls, node: yaml.Node, what: str, conv: dict[str, Callable], required: dict[str, str] | None = None
    ):
        """(dataclass cls built from a mapping node, its entries); conv maps field -> fn(value node, label).

        An absent or empty optional section gives cls's defaults.
        """
        if node.tag == NULL and not required:
            return cls(), {}
        items = self.mapping(node, what)
        self.check_keys(items, [f.name for f in fields(cls) if f.name in conv], what)
        self.require(node, items, required or {}, what)
        return cls(**{k: conv[k](v, f"{what}.{k}") for k, (_, v) in items.items()}), items

    def text_map(self, node: yaml.Node, what: str, shape: str, key: Callable, value: Callable) -> dict[str, str]:
        """A mapping whose keys are checked by key(key node) and values by value(value node, key)."""
        if node.tag == NULL:
            return {}
        out: dict[str, str] = {}
        for knode, vnode in self.mapping(node, what, shape).values():
            name = key(knode)
            if name in out:  # two spellings of one key, e.g. the same subnet written twice
                raise self.error(knode, f"{what} names {name} twice", "each key once")
            out[name] = value(vnode, name)
        return out

    # --- scalars --------------------------------------------------------------------------------

    def _scalar(self, node: yaml.Node, what: str, expected: str) -> yaml.ScalarNode:
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, f"{what} is {kind(node)}", expected)
        if not node.tag.startswith(STD_TAG):
            raise self.error(node, f"{what} has an unknown YAML tag {node.tag}", expected)
        if node.tag == NULL or (node.tag == STR and not node.value.strip()):
            raise self.error(node, f"{what} is empty", expected)
        if len(node.value) > MAX_VALUE:
            raise self.error(node, f"{what} is {len(node.value)} characters long", f"at most {MAX_VALUE}")
        hidden = _HIDDEN.search(node.value)
        if hidden:
            raise self.error(
                node,
                f"{what} contains the invisible character U+{ord(hidden[0]):04X}",
                "plain text: control and bidirectional characters hide what is really written",
            )
        return node

    def text(self, node: yaml.Node, what: str, pattern: re.Pattern | None = None, expected: str = "text") -> str:
        """Non-empty text as written: 'yes', '1.10' or '0755' stay what was typed, not YAML's bool/float/int."""
        value = self._scalar(node, what, expected).value
        if pattern is not None and not pattern.match(value):
            raise self.error(node, f"{what} {shorten(repr(value))} is not allowed", expected)
        return value

    def opt_text(self, node: yaml.Node, what: str, pattern=None, expected="text") -> str | None:
        return None if node.tag == NULL else self.text(node, what, pattern, expected)

    def text_list(
        self, node: yaml.Node, what: str, expected: str = "text", pattern: re.Pattern | None = None
    ) -> list[str]:
        """A list of non-empty texts; "key:" with nothing after it is an empty list."""
        if node.tag == NULL:
            return []
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{what} is {kind(node)}", f"a list of {expected}")
        return [self.text(item, f"{what} item", pattern, expected) for item in node.value]

    def flag(self, node: yaml.Node, what: str) -> bool:
        """on/off (YAML 1.1 reads on, off, true, false, yes and no as booleans)."""
        expected = "on or off"
        node = self._scalar(node, what, expected)
        if node.tag == BOOL:
            return bool(self._loader.construct_object(node))
        raise self.error(node, f"{what} '{shorten(node.value.strip(), 40)}' is not on or off", expected)

    def choice(self, node: yaml.Node, what: str, choices: tuple[str, ...]) -> str:
        value = self.text(node, what, expected="one of: " + ", ".join(choices))
        if value not in choices:
            raise self.error(node, f"{what} '{value}' is not known", did_you_mean(value, choices))
        return value

    def integer(self, node: yaml.Node, what: str, lo: int, hi: int | None = None) -> int:
        expected = f"an integer {lo}-{hi}" if hi is not None else f"an integer >= {lo}"
        node = self._scalar(node, what, expected)
        shown = shorten(node.value.strip(), 40)
        value = None
        if len(node.value) <= 40 and node.tag in (INT, STR):  # a 5000-digit number is no port or size
            try:
                if node.tag == INT:
                    value = self._loader.construct_object(node)  # 0x1F, 0o17, 1_000 as YAML reads them
                elif re.fullmatch(r"\s*[+-]?\d+\s*", node.value):
                    value = int(node.value)  # "22" quoted is still plainly a number
            except (ValueError, IndexError, TypeError):  # !!int abc, !!int ''
                value = None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(node, f"{what} '{shown}' is not an integer", expected)
        if value < lo or (hi is not None and value > hi):
            raise self.error(node, f"{what} {shown} is out of range", expected)
        return value

    def opt_integer(self, node: yaml.Node, what: str, lo: int, hi: int | None = None) -> int | None:
        return None if node.tag == NULL else self.integer(node, what, lo, hi)

    def number(self, node: yaml.Node, what: str, hi: float | None = None) -> float:
        """A finite number > 0 (and <= hi when given)."""
        expected = "a number > 0" + (f" and <= {hi:g}" if hi is not None else "")
        node = self._scalar(node, what, expected)
        shown = shorten(node.value.strip(), 40)
        try:
            if len(node.value) > 40:  # no sensible seconds or fraction needs more digits
                raise self.error(node, f"{what} '{shown}' is too long for a number", expected)
            value = float(self._loader.construct_object(node) if node.tag in (INT, FLOAT) else node.value)
        except (ValueError, TypeError, IndexError):  # !!float '', !!float abc
            raise self.error(node, f"{what} '{shown}' is not a number", expected) from None
        except OverflowError:  # an integer too large for a float
            value = float("inf")
        if not 0 < value < float("inf") or (hi is not None and value > hi):
            raise self.error(node, f"{what} {shown} is out of range", expected)
        return value
