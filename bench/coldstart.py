"""Cold start: `check --json` and the TUI's time to facts against a sequential OpenSSH loop running
the same probe command on each node; `--version` against a bare Python start. Same run, side by side.

    python bench/coldstart.py [--nodes 2] [--repeat 3] [--json]

The nodes are the demo's SSH servers on 127.0.0.0/8. The OpenSSH loop is what a careful script
would do by hand: `ssh node 'sh -c PROBE'` for one node after the other, host keys verified; the loop
and `check` take turns going first. The demo's nodes run their tools on this machine, so the CPU they
use (measured on the demo's process) is printed too, with the floor it sets for `check`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo_nodes import ENV, ROOT, Demo, median, sparktui, tui_to_facts  # noqa: E402

CORES = os.cpu_count() or 1


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def node_cpu(pid: int) -> float:
    """CPU seconds the demo's process has used with its ended children: every command the nodes ran.
    The simulated nodes share this machine's cores with the client, so this work bounds both fronts."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def openssh_loop(config_path: str) -> tuple[float, float]:
    """(seconds, CPU seconds) of probing every node one after the other with the OpenSSH client."""
    from sparktui.core.config.config import load_config
    from sparktui.core.nodes.probes import probe_command

    cfg = load_config(config_path)
    cpu0, t0 = children_cpu(), time.perf_counter()
    for n in cfg.nodes:
        r = subprocess.run(
            [
                "ssh",
                "-F",
                "/dev/null",
                "-p",
                str(n.port),
                "-i",
                n.identity_file,
                "-o",
                f"UserKnownHostsFile={cfg.ssh.known_hosts}",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes",
                f"{n.user}@{n.host}",
                probe_command(cfg.model.path),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        if r.returncode != 0:
            raise SystemExit(f"ssh to {n.name} failed: {r.stderr[-300:]}")
    return time.perf_counter() - t0, children_cpu() - cpu0


def timed(argv: list[str], times: int = 5) -> float:
    t0 = time.perf_counter()
    for _ in range(times):
        subprocess.run(argv, capture_output=True, env=ENV, cwd=ROOT, check=True)
    return (time.perf_counter() - t0) / times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    runs = []
    with Demo(a.nodes) as demo:
        pid = demo.proc.pid
        for i in range(a.repeat):
            for step in ("loop", "check") if i % 2 == 0 else ("check", "loop"):  # a drifting load hits both
                n0 = node_cpu(pid)
                if step == "loop":
                    loop_s, loop_cpu = openssh_loop(demo.config)
                    loop_nodes = node_cpu(pid) - n0
                    continue
                cpu0 = children_cpu()
                check_s, r = sparktui("--config", demo.config, "check", "--json")
                check_cpu = children_cpu() - cpu0
                check_nodes = node_cpu(pid) - n0
                if r.returncode != 0:
                    raise SystemExit(f"check failed: {r.stderr[-500:]}")
            tui = tui_to_facts(demo.config)
            bare = timed([sys.executable, "-c", "pass"])
            version = timed([sys.executable, "-m", "sparktui", "--version"])
            runs.append(
                {
                    "openssh_s": round(loop_s, 3),
                    "openssh_cpu_s": round(loop_cpu, 3),
                    "check_s": round(check_s, 3),
                    "check_cpu_s": round(check_cpu, 3),
                    "nodes_cpu_openssh_s": round(loop_nodes, 3),
                    "nodes_cpu_check_s": round(check_nodes, 3),
                    # all the CPU each needs, its own and the nodes': where the cores are the bottleneck
                    # (the demo's nodes share them with the client), wall time tends to this ratio
                    "check_work_vs_openssh": round((check_cpu + check_nodes) / (loop_cpu + loop_nodes), 2),
                    "tui_facts_s": round(tui.get("facts_s", float("nan")), 3),
                    "bare_python_s": round(bare, 4),
                    "version_s": round(version, 4),
                    "check_vs_openssh": round(check_s / loop_s, 2),
                    "check_cpu_vs_openssh": round(check_cpu / loop_cpu, 2) if loop_cpu else None,
                    "tui_vs_check": round(tui.get("facts_s", float("nan")) / check_s, 2),
                    "version_vs_bare": round(version / bare, 2),
                }
            )
    keys = ("check_vs_openssh", "check_cpu_vs_openssh", "check_work_vs_openssh", "tui_vs_check", "version_vs_bare")
    out = {
        "nodes": a.nodes,
        "repeat": a.repeat,
        "cores": CORES,
        "runs": runs,
        "median": {k: median([r[k] for r in runs if r[k] is not None]) for k in keys},
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    m = out["median"]
    print(f"cold start, {a.nodes} demo nodes, median of {a.repeat}; load average {out['load_avg']}")
    print(
        f"  check --json / sequential OpenSSH probe loop   {m['check_vs_openssh']:.2f} x  "
        f"(CPU {m['check_cpu_vs_openssh']:.2f} x)"
    )
    print(
        f"    CPU of client and nodes together              {m['check_work_vs_openssh']:.2f} x  (the demo's nodes "
        f"share this machine's {CORES} cores: where they are the bottleneck, wall time tends to this)"
    )
    print(f"  TUI facts on every card / check --json         {m['tui_vs_check']:.2f} x")
    print(f"  sparktui --version / python3 -c pass          {m['version_vs_bare']:.2f} x")
    for r in runs:
        print(
            f"  run: openssh {r['openssh_s']:.2f} s (nodes' CPU {r['nodes_cpu_openssh_s']:.2f} s), check "
            f"{r['check_s']:.2f} s (CPU {r['check_cpu_s']:.2f} s, nodes' {r['nodes_cpu_check_s']:.2f} s), TUI facts {r['tui_facts_s']:.2f} s, "
            f"--version {r['version_s'] * 1000:.0f} ms vs {r['bare_python_s'] * 1000:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
