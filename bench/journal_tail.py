"""`sparktui journal --limit 5` on a large journal: peak RSS and time against the whole-file read it
replaced (read, split into lines, parse from the end), on the same file, side by side.

    python bench/journal_tail.py [--mb 300] [--repeat 3] [--json]

The journal is written into a temporary XDG_STATE_HOME (some 1.1 M lines of ~280 bytes); each reader runs
in a child process of its own, whose peak RSS comes from wait4. Three readings: `--all --limit 5`, the
config's cluster when its entries are the newest, and a cluster with no entry at all (the whole file
scanned: memory must stay bounded even then).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What `journal` did before: the whole file read, split into lines, parsed from the end.
WHOLE_FILE = """
import json, sys
from dataclasses import asdict
from pathlib import Path
from sparktui.core.state.journal import Entry
path, limit, cluster = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] or None
out = []
for line in reversed(path.read_text(encoding="utf-8", errors="replace").splitlines()):
    if len(out) >= limit:
        break
    try:
        e = Entry(**json.loads(line))
    except (ValueError, TypeError):
        continue
    if cluster is None or e.cluster == cluster:
        out.append(e)
print(json.dumps([asdict(e) for e in out[::-1]]))
"""


def write_journal(path: Path, mb: int) -> int:
    line = json.dumps(
        {
            "node": "spark1",
            "started": 1764633600.25,
            "cluster": "lab",
            "exit_status": 0,
            "duration": 0.31,
            "error": None,
            "command": "docker ps -a --no-trunc --filter label=sparktui.deployment=lab --format "
            "'{{json .}}' && docker inspect --format '{{json .State}}' sparktui-lab-sglang-0",
        }
    )
    chunk = ((line + "\n") * 4096).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("wb") as f:
        while f.tell() < mb * 1024 * 1024:
            f.write(chunk)
            n += 4096
    return n


def measure(argv: list[str], env: dict) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    out = p.stdout.read()
    err = p.stderr.read()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{argv[2:]} failed ({p.returncode}): {err.decode()[-500:]}")
    json.loads(out)
    return seconds, usage.ru_maxrss / 1024  # ru_maxrss is KiB on Linux


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparktui-journal-bench-") as tmp:
        state = Path(tmp) / "state"
        path = state / "sparktui" / "journal.jsonl"
        lines = write_journal(path, args.mb)
        cfg = {}
        for name in ("lab", "elsewhere"):
            cfg[name] = Path(tmp) / f"{name}.yaml"
            cfg[name].write_text(
                f"cluster: {name}\nnodes: [{{name: a, host: 127.0.0.1}}]\n"
                "model: {name: m, path: /m}\nimages: {sglang: s, vllm: v}\n"
            )
        env = dict(os.environ, XDG_STATE_HOME=str(state), PYTHONPATH=str(ROOT))
        env.pop("SPARKTUI_CONFIG", None)
        cases = {
            "--all --limit 5": (["journal", "--all", "--limit", "5", "--json"], ""),
            "own cluster, newest": (["--config", str(cfg["lab"]), "journal", "--limit", "5", "--json"], "lab"),
            "cluster with no entry": (
                ["--config", str(cfg["elsewhere"]), "journal", "--limit", "5", "--json"],
                "elsewhere",
            ),
        }
        rows = []
        for label, (argv, cluster) in cases.items():
            new_t, new_m, old_t, old_m = [], [], [], []
            for i in range(args.repeat):
                runs = [
                    ("new", [sys.executable, "-m", "sparktui", *argv]),
                    ("old", [sys.executable, "-c", WHOLE_FILE, str(path), "5", cluster]),
                ]
                for kind, cmd in runs if i % 2 == 0 else runs[::-1]:  # take turns going first
                    t, m = measure(cmd, env)
                    (new_t if kind == "new" else old_t).append(t)
                    (new_m if kind == "new" else old_m).append(m)
            rows.append(
                {
                    "case": label,
                    "new_s": median(new_t),
                    "new_rss_mib": max(new_m),
                    "old_s": median(old_t),
                    "old_rss_mib": max(old_m),
                }
            )
    size = args.mb
    if args.json:
        print(json.dumps({"journal_mib": size, "lines": lines, "rows": rows}, indent=2))
        return
    print(f"journal: {size} MiB, {lines:,} lines; median of {args.repeat} runs, peak RSS the highest")
    print(f"{'case':24} {'new s':>7} {'old s':>7} {'old/new':>8} {'new MiB':>8} {'old MiB':>8} {'old/new':>8}")
    for r in rows:
        print(
            f"{r['case']:24} {r['new_s']:7.2f} {r['old_s']:7.2f} {r['old_s'] / r['new_s']:8.1f} "
            f"{r['new_rss_mib']:8.0f} {r['old_rss_mib']:8.0f} {r['old_rss_mib'] / r['new_rss_mib']:8.1f}"
        )


if __name__ == "__main__":
    main()
