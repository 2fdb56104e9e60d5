"""A deployment's state, phases, milestone kinds and problem kinds are compared with members, never with the
raw word: a typo in a literal ("stoped") silently never matches, while a misspelt member fails at import."""

import ast
from pathlib import Path

import sparktui
from sparktui.core.state.states import CheckKind, MilestoneKind, Phase, ProblemKind, State

ROOT = Path(sparktui.__file__).parent
WORDS = {s.value for s in State}
OPS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)

# Objects whose `.state` is not a deployment's, by file (relative to sparktui/) and the expression that
# holds it; their vocabularies share words with State ("failed", "stopped").
ALLOWED = {
    ("tui/app.py", "t"): "a transfer: queued/running/done/failed/lost",
    ("tui/app.py", "s"): "a launch step (LaunchStep): pending/running/done/failed",
    ("tui/present/transfers.py", "t"): "a transfer: queued/running/done/failed/lost",
}


def _state_side(node: ast.expr) -> str | None:
    """The holder of a state-named value ("" for a bare name), or None when `node` names no state."""
    if isinstance(node, ast.Name):
        name, holder = node.id, ""
    elif isinstance(node, ast.Attribute):
        name, holder = node.attr, ast.unparse(node.value)
    else:
        return None
    return holder if name in ("state", "deploy_state") or name.endswith("_state") else None


def _state_words(node: ast.expr) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in WORDS]


def _compared(source: str):
    """(compare node, one side, the other side) for each ==, !=, in, not in of the source, both ways round."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, sides, sides[1:]):
            if isinstance(op, OPS):
                yield node, a, b
                yield node, b, a


def raw_state_compares(source: str, rel: str) -> list[str]:
    """`rel:line: code` for each comparison of a state-named value with a literal State word."""
    found = []
    for node, named, other in _compared(source):
        holder = _state_side(named)
        if holder is not None and (rel, holder) not in ALLOWED and _state_words(other):
            found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_raw_state_words_in_compares():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += raw_state_compares(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, "compare with State members (State.READY), not words:\n" + "\n".join(found)


def test_the_check_finds_a_planted_compare(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "if d.current.state in ('failed', 'hung'): pass\n"
        "if 'ready' == ev.state: pass\n"
        "ok = s.deploy_state != 'wedged'\n"
        "ok = state == State.READY\n"  # a member: fine
        "ok = c.state == 'running'\n"  # not a State word: fine
    )
    found = raw_state_compares(planted.read_text(), "planted.py")
    assert [f.split(":")[1] for f in found] == ["1", "2", "3"], found


def test_the_allow_list_is_by_file_and_holder():
    src = "if t.state == 'failed': pass\n"
    assert raw_state_compares(src, "tui/app.py") == []
    assert raw_state_compares(src, "cli/deploy.py") != []  # the same name elsewhere is not excused


def test_every_allowed_entry_is_still_needed():
    for rel, holder in ALLOWED:
        source = (ROOT / rel).read_text()
        excused = [
            n
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Compare)
            and any(_state_side(s) == holder for s in [n.left, *n.comparators])
            and any(_state_words(s) for s in [n.left, *n.comparators])
        ]
        assert excused, f"{rel}: nothing compares {holder}.state with a State word; drop it from ALLOWED"


# ---- phases, milestone, problem and check kinds ---------------------------------------------------

KIND_WORDS = {k.value for k in (*MilestoneKind, *ProblemKind, *CheckKind)}
PHASE_WORDS = {p.value for p in Phase}
# Other vocabularies held in a `.kind` that share a word with these, by file and holder.
KIND_ALLOWED = {
    ("core/preflight/check_program.py", ""): "the check program: stdlib only in any image, it names CheckKind's words",
}


def _vocab_side(node: ast.expr) -> tuple[str, set[str]] | None:
    """(holder, the words it may hold) of a kind- or phase-named value; None when `node` names neither."""
    if isinstance(node, ast.Name):
        name, holder = node.id, ""
    elif isinstance(node, ast.Attribute):
        name, holder = node.attr, ast.unparse(node.value)
    else:
        return None
    if name == "kind" or name.endswith("_kind"):
        return holder, KIND_WORDS
    if name == "phase" or name.endswith("_phase"):
        return holder, PHASE_WORDS
    return None


def raw_vocab_compares(source: str, rel: str) -> list[str]:
    """`rel:line: code` for each comparison of a kind or phase with a literal word of its vocabulary."""
    found = []
    for node, named, other in _compared(source):
        side = _vocab_side(named)
        if side is None or (rel, side[0]) in KIND_ALLOWED:
            continue
        items = other.elts if isinstance(other, (ast.Tuple, ast.List, ast.Set)) else [other]
        if any(isinstance(i, ast.Constant) and i.value in side[1] for i in items):
            found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_raw_phase_milestone_or_problem_words_in_compares():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += raw_vocab_compares(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, "compare with members (ProblemKind.WEDGED, Phase.WEIGHTS), not words:\n" + "\n".join(found)


def test_the_vocabulary_check_finds_a_planted_compare():
    planted = (
        "if p.kind == 'rendezvous_hang': pass\n"
        "if m.kind in ('dist_init_end', 'transport'): pass\n"
        "ok = 'weights' != self.phase\n"
        "ok = sign.kind == ProblemKind.WEDGED\n"  # a member: fine
        "ok = step.kind == 'wait'\n"  # not a word of these vocabularies: fine
        "ok = node_phase == 'first_request'\n"
        "ok = t.kind == 'model'\n"  # a transfer's kind: fine
        "if verdict.root.kind in ('peer_late', 'skipped'): pass\n"  # a preflight row's
        "ok = r.kind != CheckKind.MEMORY\n"  # a member: fine
    )
    found = raw_vocab_compares(planted, "planted.py")
    assert [f.split(":")[1] for f in found] == ["1", "2", "3", "6", "8"], found


def test_every_kind_allowance_is_still_needed():
    for rel, holder in KIND_ALLOWED:
        tree = ast.parse((ROOT / rel).read_text())
        excused = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Compare)
            and any((_vocab_side(s) or ("?",))[0] == holder for s in [n.left, *n.comparators])
        ]
        assert excused and raw_vocab_compares(ast.unparse(tree), "elsewhere.py"), (
            f"{rel}: drop {holder} from KIND_ALLOWED"
        )


# ---- the check program's words ------------------------------------------------------------------


def _names_kind(node: ast.expr) -> bool:
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return (node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)) == "kind"


def _words(node: ast.expr) -> set[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
    return {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def program_kind_words(source: str) -> set[str]:
    """The words a source names as a kind: raised in a CheckFailure, compared with, or-ed with, assigned to or
    keyed by `kind`."""
    words: set[str] = set()
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "CheckFailure" and n.args:
            words |= _words(n.args[0])
        elif isinstance(n, (ast.Compare, ast.BoolOp)):
            parts = [n.left, *n.comparators] if isinstance(n, ast.Compare) else n.values
            if any(_names_kind(p) for p in parts):
                words |= set().union(*(_words(p) for p in parts))
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                both = isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple)
                pairs = zip(t.elts, n.value.elts) if both else [(t, n.value)]
                words |= set().union(*(_words(v) for k, v in pairs if _names_kind(k)))
        elif isinstance(n, ast.Dict):
            words |= set().union(*(_words(v) for k, v in zip(n.keys, n.values) if _words(k) == {"kind"}))
    return words


def test_the_check_program_names_only_check_kinds():
    """It runs in any image and cannot import the enum (hence its allowance above): every word it names for a
    kind is a CheckKind, so the verdict reads each as its member."""
    from sparktui.core.preflight import check_program

    named = program_kind_words(Path(check_program.__file__).read_text()) | set(check_program.KINDS)
    assert {"gpu", "timeout", "unknown", "peer_failed", "address_missing"} <= named  # it finds them at all
    assert named <= {k.value for k in CheckKind}, named - {k.value for k in CheckKind}


def test_the_program_words_check_finds_planted_words():
    planted = (
        "raise CheckFailure('timout', 'x')\n"
        "if kind in (None, 'hung'): pass\n"
        "kind, line = 'stuck', None\n"
        "res['kind'] = kind or 'unknwon'\n"
        "out = {'kind': 'lost', 'error': 'gpu'}\n"
        "ok = stage == 'rendezvous'\n"  # not a kind
    )
    assert program_kind_words(planted) == {"timout", "hung", "stuck", "unknwon", "lost"}
