"""A deployment's state, phases, milestone kinds and problem kinds are compared with members, never with the
raw word: a typo in a literal ("stoped") silently never matches, while a misspelt member fails at import."""

import ast
from pathlib import Path

import sparktui
from sparktui.core.state.states import MilestoneKind, Phase, ProblemKind, State

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


def raw_state_compares(source: str, rel: str) -> list[str]:
    """`rel:line: code` for each comparison of a state-named value with a literal State word."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, sides, sides[1:]):
            if not isinstance(op, OPS):
                continue
            for named, other in ((a, b), (b, a)):
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


# ---- phases, milestone kinds and problem kinds ---------------------------------------------------

KIND_WORDS = {k.value for k in (*MilestoneKind, *ProblemKind)}
PHASE_WORDS = {p.value for p in Phase}
# Other vocabularies held in a `.kind` that share a word with these, by file and holder.
KIND_ALLOWED = {
    ("core/preflight/verdict.py", "r"): "a preflight row's failure: stopped/skipped/memory/... (preflight/verdict.py)",
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
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, sides, sides[1:]):
            if not isinstance(op, OPS):
                continue
            for named, other in ((a, b), (b, a)):
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
    )
    found = raw_vocab_compares(planted, "planted.py")
    assert [f.split(":")[1] for f in found] == ["1", "2", "3", "6"], found


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
