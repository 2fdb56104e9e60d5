"""Score `diagnose` on the corpus of real logs in tests/corpus: accuracy per expected kind and overall.
A case marked `constructed:` (built from the shapes of real lines, not captured) is scored apart.

Each corpus file names the verdict it must get (`kind`), and for a log that stops the phase (and
rank, where the log shows it). A benign log (`kind: none`) scores when nothing fatal is reported.
Run: python3 bench/diagnose_corpus.py [--verbose]
"""

from __future__ import annotations

import io
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.core.diagnosis.diagnose import Diagnoser  # noqa: E402
from sparktui.core.diagnosis.logfile import diagnose_stream  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"


def load(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    head, _, log = raw.partition(b"\n---\n")
    meta = {}
    for line in head.decode("utf-8").splitlines():
        key, _, value = line.partition(":")
        meta[key.strip()] = value.strip()
    return meta, log


def diagnose(meta: dict, log: bytes) -> Diagnoser:
    engine = meta["engine"] if meta["engine"] in ("vllm", "sglang") else "vllm"  # torch/NCCL/Ray text: engine-neutral
    return diagnose_stream(io.BytesIO(log), Diagnoser(engine))


def judge(meta: dict, d: Diagnoser) -> tuple[bool, str]:
    """(right, what it said)."""
    probs = d.ordered_problems()
    if meta["kind"] == "none":
        fatal = [p.kind for p in probs if not p.provisional]
        return not fatal, ",".join(fatal) or "no failure"
    if not probs:
        return False, "none"
    p = probs[0]
    said = p.kind + (f"@{p.phase}" if p.phase else "") + (f"#{p.rank}" if p.rank is not None else "")
    ok = p.kind == meta["kind"]
    if ok and meta.get("phase"):
        ok = p.phase == meta["phase"]
    if ok and meta.get("rank"):
        ok = str(p.rank) == meta["rank"]
    return ok, said


def score(verbose: bool = False) -> dict:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses, benign_fatal, constructed = [], [], [0, 0]
    for path in sorted(CORPUS.glob("*.log")):
        meta, log = load(path)
        d = diagnose(meta, log)
        ok, said = judge(meta, d)
        if meta.get("constructed"):  # built from real lines' shapes, not captured: scored apart from the real logs
            constructed[0] += ok
            constructed[1] += 1
        else:
            per[meta["kind"]][1] += 1
            per[meta["kind"]][0] += ok
        if not ok:
            misses.append((path.name, meta["kind"], said))
            if meta["kind"] == "none":
                benign_fatal.append(path.name)
        if verbose:
            print(f"{'ok ' if ok else 'MISS'} {path.name}: expected {meta['kind']}, got {said}")
    right = sum(r for r, _ in per.values())
    total = sum(n for _, n in per.values())
    return {
        "per_kind": dict(per),
        "right": right,
        "total": total,
        "accuracy": right / total if total else 0.0,
        "misses": misses,
        "benign_fatal": benign_fatal,
        "constructed": {"right": constructed[0], "total": constructed[1]},
    }


def main() -> int:
    res = score(verbose="--verbose" in sys.argv)
    print(f"{'kind':18} {'right':>5} / {'logs':<4} accuracy")
    for kind, (r, n) in sorted(res["per_kind"].items()):
        print(f"{kind:18} {r:>5} / {n:<4} {100 * r / n:5.1f} %")
    print(f"{'overall':18} {res['right']:>5} / {res['total']:<4} {100 * res['accuracy']:5.1f} %")
    c = res["constructed"]
    print(f"{'constructed':18} {c['right']:>5} / {c['total']:<4} (not captured: not in the score above)")
    for name, kind, said in res["misses"]:
        print(f"  miss: {name}: expected {kind}, got {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
