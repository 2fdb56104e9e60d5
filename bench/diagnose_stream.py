"""`sparktui diagnose` on a big log: time against `grep -c .` on the same file, and peak memory.

    python3 bench/diagnose_stream.py [--size-mib 1024] [--keep DIR] [--json]

The log is generated in a temporary directory (removed afterwards): a real vLLM start-up
transcript (tests/unit/transcripts/vllm_ray_ready.log), then serving lines of the two kinds a busy
vLLM server prints (the uvicorn access line per request and the engine's throughput line), with
varying numbers, up to the size asked, and a CUDA OOM at the very end, so the diagnosis must read
to the last line to be right. Both commands run as child processes; their peak RSS comes from
wait4. Goals: diagnose within 5x of grep's time, under 100 MiB RSS, and the OOM found.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP = ROOT / "tests" / "unit" / "transcripts" / "vllm_ray_ready.log"
FAILURE = (
    b"(EngineCore_DP0 pid=790) ERROR 03-02 18:02:11 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
    b"Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 119.70 GiB\n"
)


def generate(path: Path, size: int) -> int:
    rnd = random.Random(7)
    block = []
    for i in range(20000):
        if i % 7 == 0:
            block.append(
                f"(APIServer pid=1) INFO 03-02 {11 + i // 3600 % 12:02d}:{i // 60 % 60:02d}:{i % 60:02d} "
                f"[loggers.py:123] Engine 000: Avg prompt throughput: {rnd.uniform(0, 9000):.1f} tokens/s, "
                f"Avg generation throughput: {rnd.uniform(0, 300):.1f} tokens/s, Running: {rnd.randint(0, 64)} "
                f"reqs, Waiting: {rnd.randint(0, 9)} reqs, GPU KV cache usage: {rnd.uniform(0, 99):.1f}%, "
                f"Prefix cache hit rate: {rnd.uniform(0, 99):.1f}%\n"
            )
        else:
            block.append(
                f"(APIServer pid=1) INFO:     10.0.{rnd.randint(0, 9)}.{rnd.randint(2, 250)}:{rnd.randint(1024, 65535)}"
                f' - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
            )
    chunk = "".join(block).encode()
    lines = 0
    with open(path, "wb") as f:
        head = STARTUP.read_bytes()
        f.write(head)
        written, lines = len(head), head.count(b"\n")
        while written + len(chunk) < size:
            f.write(chunk)
            written += len(chunk)
            lines += len(block)
        f.write(FAILURE)
        lines += 1
    return lines


def run(argv: list[str]) -> tuple[float, float, bytes, float]:
    """(seconds, peak RSS in MiB, stdout, CPU seconds) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, out, usage.ru_utime + usage.ru_stime


def best(argv: list[str], times: int) -> tuple[float, float, bytes, float]:
    runs = [run(argv) for _ in range(times)]
    return min(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2], min(r[3] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3, help="runs of each command; the fastest counts")
    ap.add_argument("--keep", metavar="DIR", help="generate the log here and keep it")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="diagnose-bench-")
    where = Path(args.keep or tmp.name)
    where.mkdir(parents=True, exist_ok=True)
    log = where / "engine.log"
    try:
        lines = generate(log, args.size_mib << 20)
        size = log.stat().st_size
        g_s, g_rss, g_out, g_cpu = best(["grep", "-c", ".", str(log)], args.runs)
        d_s, d_rss, d_out, d_cpu = best([sys.executable, "-m", "sparktui", "diagnose", "--json", str(log)], args.runs)
    finally:
        if tmp is not None:
            tmp.cleanup()
    verdict = json.loads(d_out)
    found = [p["kind"] for p in verdict["problems"]]
    res = {
        "size_mib": round(size / 2**20),
        "lines": lines,
        "grep_s": round(g_s, 3),
        "diagnose_s": round(d_s, 3),
        "ratio": round(d_s / g_s, 2),
        "grep_cpu_s": round(g_cpu, 3),
        "diagnose_cpu_s": round(d_cpu, 3),
        "diagnose_rss_mib": round(d_rss, 1),
        "grep_rss_mib": round(g_rss, 1),
        "grep_count": int(g_out),
        "found": found,
        "last_line": verdict["nodes"][0]["last_line"]["line"],
    }
    res["ok"] = (
        res["ratio"] <= 5
        and res["diagnose_rss_mib"] < 100
        and found[:1] == ["out_of_memory"]
        and res["last_line"] == lines
    )
    if args.json:
        print(json.dumps(res))
    else:
        print(f"log: {res['size_mib']} MiB, {lines} lines (generated in a temporary directory)")
        print(f"grep -c .          {g_s:7.2f} s wall {g_cpu:6.2f} s CPU   peak RSS {g_rss:6.1f} MiB")
        print(
            f"sparktui diagnose  {d_s:7.2f} s wall {d_cpu:6.2f} s CPU   peak RSS {d_rss:6.1f} MiB   "
            f"-> {d_s / g_s:.1f}x grep's wall time (goal <= 5x, < 100 MiB)"
        )
        print(f"verdict: {', '.join(found) or 'none'}; last line read {res['last_line']} of {lines}")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
