"""Model copy between two lab nodes: the link's ceiling, today's single rsync and sparktui's copy, same run.

    sudo python bench/transfer.py [--shards 8] [--shard-mb 118] [--repeat 3] [--streams 1 2 3] [--json]
                                  [--demo] [--demo-link-mbps 8] [--demo-stream-mbps 2] [--no-lab]

Two lab nodes (tests/lab/netlab.py: network namespaces, real sshd and rsync, a fabric veth) hold
the same shards; every method copies them node1 -> node2 over the fabric, interleaved, --repeat
times, and the median is reported:
  raw-tcp      python3 sendfile over one TCP connection to a python3 receiver writing one file:
               the ceiling of the link and the destination's writes, no encryption
  today        the rsync command line sparktui ran before parallel streams (remote.rsync_job: ssh's
               default cipher, delta transfer machinery)
  sparktui-kN  sparktui's copy job (streams.job) with N streams and the cipher cipher.choose picks
CPU-s/GB adds up every process of the copy: the client side (commands started on node1 run under
this process, so getrusage of children) and each node's processes (the node's PID namespace:
utime+stime+cutime+cstime of every process in it, before and after; children are reaped inside
it, sshd sessions by sshd). The bound a method hit is named: the box's cores (busy >= 90 % of
them, from /proc/stat), the link (>= 80 % of raw TCP), the destination's writes (>= 80 % of a
plain write of the same bytes on node2), else one stream's cores.
--demo runs `sync model` on the demo's shared-link model (demo/link.py) with 1..N streams: each
stream is held to --demo-stream-mbps (one core's worth of ssh), the node's link to --demo-link-mbps.
Needs root (the lab); everything stays inside the lab's namespaces or on 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.copyprogs import RECEIVER, SENDER, WRITER  # noqa: E402
from sparktui.core.transfers import cipher, remote, streams  # noqa: E402
from sparktui.core.transfers.options import TransferOptions  # noqa: E402

SRC = "/models/bench-src"
DST = "/models/bench-dst"
MB = 1 << 20
GB = 1e9
PORT = 47011


def node_cpu(pid1: int) -> float:
    """CPU seconds of every process in the PID namespace of pid1, reaped children included."""
    tick = os.sysconf("SC_CLK_TCK")
    ns = os.readlink(f"/proc/{pid1}/ns/pid")
    total = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{p}/ns/pid") != ns:
                continue
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / tick


def client_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def box_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


@dataclass
class Run:
    method: str
    seconds: float
    cpu: dict
    busy: float  # share of the box's cores in use (0..1)

    def gbps(self, nbytes: int) -> float:
        return nbytes / self.seconds / GB


class LabNodeRunner:
    """cipher.choose talks to a node through .run(); here through the lab's nsenter."""

    def __init__(self, lab, name: str):
        self.lab, self.name = lab, name

    async def run(self, cmd: str, timeout: float = 60):
        r = self.lab.sh(self.name, ["sh", "-c", cmd], check=False, timeout=timeout)

        class R:
            ok = r.returncode == 0
            exit_status = r.returncode
            stdout = r.stdout
            stderr = r.stderr

        return R()


STATE = "/root/.local/state/sparktui/transfers"


def measure(lab, method: str, fn) -> Run:
    n1, n2 = lab.node("node1"), lab.node("node2")
    lab.sh("node2", f"rm -rf {DST} && mkdir -p {DST} && sync")
    lab.sh("node1", f"rm -rf {STATE}")
    if method.endswith("-sync"):  # sparktui copies the model directory to the same path
        lab.sh("node2", f"rm -rf {SRC} && sync")
    c0, a0, b0, (bz0, tot0) = client_cpu(), node_cpu(n1.pid), node_cpu(n2.pid), box_busy()
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    c1, a1, b1, (bz1, tot1) = client_cpu(), node_cpu(n1.pid), node_cpu(n2.pid), box_busy()
    cpu = {"client": c1 - c0, "node1": a1 - a0, "node2": b1 - b0}
    cpu["total"] = sum(cpu.values())
    return Run(method, dt, cpu, (bz1 - bz0) / max(1, tot1 - tot0))


def raw_tcp(lab, nbytes: int) -> None:
    addr = lab.node("node2").fabric_ip
    argv_r = ["python3", "-c", RECEIVER, addr, str(PORT), f"{DST}/raw.bin"]
    n2 = lab.node("node2")
    recv = subprocess.Popen(
        ["nsenter", "-t", str(n2.pid), "-n", "-m", "-p", "--", *argv_r], stdout=subprocess.PIPE, text=True
    )
    try:
        assert recv.stdout.readline().strip() == str(PORT)
        lab.sh("node1", ["python3", "-c", SENDER, addr, str(PORT), f"{SRC}/shards"], timeout=600)
        recv.wait(120)
    finally:
        if recv.poll() is None:
            recv.kill()
    size = int(lab.sh("node2", f"stat -c %s {DST}/raw.bin").stdout)
    assert size == nbytes, f"raw copy moved {size} of {nbytes} bytes"


def run_job(lab, job: str, files: dict[str, str]) -> None:
    d = "/tmp/bench-job"
    setup = f"rm -rf {d} && mkdir -p {d} && cd {d}\n" + "".join(
        f"printf '%s' {shlex.quote(t)} > {shlex.quote(n)}\n" for n, t in files.items()
    )
    lab.sh("node1", setup)
    r = lab.sh("node1", ["sh", "-c", f"cd {d} && {job}"], check=False, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"copy failed (exit {r.returncode}): {r.stdout[-800:]} {r.stderr[-800:]}")


def options_alone(today: str, chosen: str | None) -> dict[str, str]:
    """Today's command line with one change each: the chosen cipher, ChaCha20 named (OpenSSH's
    default), --whole-file, and rsync's transfer checksum off (not safe: shown for its price)."""
    out = {}
    if chosen:
        out[f"+{chosen.split('@')[0]}"] = today.replace("-o BatchMode=yes", f"-o Ciphers={chosen} -o BatchMode=yes")
    out["+chacha20"] = today.replace("-o BatchMode=yes", "-o Ciphers=chacha20-poly1305@openssh.com -o BatchMode=yes")
    out["+whole-file"] = today.replace("rsync -a ", "rsync -a --whole-file ")
    out["+no-checksum"] = today.replace("rsync -a ", "rsync -a --checksum-choice=none ")
    return out


def sync_cli(tree: Path, cfg: Path) -> None:
    """`sparktui sync model --to node2 --wait` from a source tree (this one, or the baseline's)."""
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"} | {"PYTHONPATH": str(tree)}
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", "--config", str(cfg), "sync", "model", "--to", "node2", "--wait", "--json"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    if r.returncode != 0:
        raise SystemExit(f"sync from {tree} failed: {r.stdout[-600:]} {r.stderr[-600:]}")


def baseline_tree(rev: str) -> Path:
    """The sources at `rev` (what sparktui ran before), unpacked once."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    out = Path(f"/tmp/sparktui-baseline-{sha[:12]}")
    if not (out / "sparktui").is_dir():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            f"git -C {shlex.quote(str(ROOT))} archive {sha} | tar -x -C {shlex.quote(str(out))}", shell=True, check=True
        )
    return out


def check_copy(lab, nbytes: int, where: str = DST) -> None:
    got = int(
        lab.sh("node2", f"find {where}/shards -type f -printf '%s\\n' | awk '{{s += $1}} END {{print s + 0}}'").stdout
    )
    assert got == nbytes, f"copied {got} of {nbytes} bytes"


def lab_bench(args) -> dict:
    if args.no_lab:
        return {}
    from tests.lab.netlab import Lab

    nbytes = args.shards * args.shard_mb * MB
    with Lab(nodes=2, docker=False) as lab:
        lab.trust("node1", "node2")
        lab.sh(
            "node1",
            f"mkdir -p {SRC}/shards && for i in $(seq 1 {args.shards}); do "
            f"head -c {args.shard_mb * MB} /dev/urandom > {SRC}/shards/model-$i.safetensors; done",
            timeout=600,
        )
        addr, user = lab.node("node2").fabric_ip, "root"
        opts = TransferOptions(connect_timeout=5)
        choice = asyncio.run(cipher.choose(LabNodeRunner(lab, "node1"), user, addr, opts))
        sizes = {f"shards/model-{i}.safetensors": args.shard_mb * MB for i in range(1, args.shards + 1)}
        today = remote.rsync_job(SRC, user, addr, DST, opts.ssh, opts.connect_timeout, opts.io_timeout)
        ssh = remote.ssh_command(opts.ssh, opts.connect_timeout, choice.ciphers)
        methods = {"raw-tcp": lambda: raw_tcp(lab, nbytes), "today": lambda: run_job(lab, today, {})}
        if args.options:  # each option of sparktui's copy alone on today's command line
            for name, cmd in options_alone(today, choice.cipher).items():
                methods[name] = lambda c=cmd: run_job(lab, c, {})
        for k in args.streams:
            p = streams.plan(sizes, {}, k)
            job = streams.job(p, SRC, user, addr, DST, ssh, opts.io_timeout)
            methods[f"sparktui-k{p.count}"] = lambda j=job, f=streams.state_files(p): run_job(lab, j, f)
        if args.sync:  # the whole `sync model`, client and polling included, before and now
            data = lab.config_data()
            data["model"]["path"] = SRC
            cfg = lab.write_config(data, lab.dir / "bench.yaml")
            old = baseline_tree(args.baseline)
            methods["today-sync"] = lambda: sync_cli(old, cfg)
            methods["sparktui-sync"] = lambda: sync_cli(ROOT, cfg)
        runs: dict[str, list[Run]] = {m: [] for m in methods}
        disk: list[float] = []
        for _ in range(args.repeat):
            for name, fn in methods.items():
                r = measure(lab, name, fn)
                if name != "raw-tcp":
                    check_copy(lab, nbytes, SRC if name.endswith("-sync") else DST)
                runs[name].append(r)
            lab.sh("node2", f"rm -rf {DST} && mkdir -p {DST}")
            t0 = time.perf_counter()
            lab.sh("node2", ["python3", "-c", WRITER, f"{DST}/w.bin", str(nbytes // MB)], timeout=600)
            disk.append(nbytes / (time.perf_counter() - t0) / GB)
        lab.sh("node2", f"rm -rf {DST}")
    return {
        "bytes": nbytes,
        "cipher": choice.cipher,
        "cipher_note": choice.note,
        "cores": os.cpu_count(),
        "disk_gbps": statistics.median(disk),
        "runs": runs,
    }


def summarise(res: dict) -> list[dict]:
    nbytes, runs = res["bytes"], res["runs"]
    gb = nbytes / GB

    def med(rs: list[Run], f) -> float:
        return statistics.median(f(r) for r in rs)

    raw = med(runs["raw-tcp"], lambda r: r.gbps(nbytes))
    base_rate = med(runs["today"], lambda r: r.gbps(nbytes))
    base_cpu = med(runs["today"], lambda r: r.cpu["total"] / gb)
    one = next((med(rs, lambda r: r.gbps(nbytes)) for m, rs in runs.items() if m == "sparktui-k1"), None)
    rows = []
    for m, rs in runs.items():
        rate, cpu, busy = (
            med(rs, lambda r: r.gbps(nbytes)),
            med(rs, lambda r: r.cpu["total"] / gb),
            med(rs, lambda r: r.busy),
        )
        parts = {k: med(rs, lambda r, k=k: r.cpu[k] / gb) for k in ("client", "node1", "node2")}
        if busy >= 0.9:
            bound = "cores of this box"
        elif m != "raw-tcp" and rate >= 0.8 * raw:
            bound = "link"
        elif rate >= 0.8 * res["disk_gbps"]:
            bound = "destination writes"
        else:
            bound = "one stream's cores" if m != "raw-tcp" else "link"
        k = int(m.rsplit("k", 1)[1]) if m.startswith("sparktui-k") else None
        rows.append(
            {
                "method": m,
                "gbps": rate,
                "x_raw": rate / raw,
                "x_today": rate / base_rate,
                "cpu_s_per_gb": cpu,
                "cpu_x_today": cpu / base_cpu,
                "cpu_parts": parts,
                "busy": busy,
                "x_k_one_stream": (rate / (k * one)) if k and one else None,
                "bound": bound,
            }
        )
    return rows


def print_rows(res: dict, rows: list[dict]) -> None:
    print(
        f"{res['bytes'] / GB:.2f} GB of shards node1 -> node2 over the fabric veth; this box has "
        f"{res['cores']} cores; destination plain write {res['disk_gbps']:.2f} GB/s; cipher: "
        f"{res['cipher'] or 'ssh default'}" + (f" ({res['cipher_note']})" if res["cipher_note"] else "")
    )
    print(
        f"{'method':<16} {'GB/s':>6} {'x raw':>6} {'x today':>8} {'CPU-s/GB':>9} {'x today':>8} "
        f"{'(client/node1/node2)':>22} {'busy':>5} {'x k*1':>6}  bound"
    )
    for r in rows:
        p = r["cpu_parts"]
        kk = f"{r['x_k_one_stream']:.2f}" if r["x_k_one_stream"] is not None else "-"
        print(
            f"{r['method']:<16} {r['gbps']:6.3f} {r['x_raw']:6.2f} {r['x_today']:8.2f} {r['cpu_s_per_gb']:9.2f} "
            f"{r['cpu_x_today']:8.2f} {p['client']:6.2f}/{p['node1']:5.2f}/{p['node2']:5.2f}   "
            f"{r['busy'] * 100:4.0f}% {kk:>6}  {r['bound']}"
        )


def demo_bench(args) -> dict:
    """`sync model --to spark2 --wait --copy-streams k` on one demo, the copy removed between runs;
    each stream held to --demo-stream-mbps, the node's link to --demo-link-mbps."""
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"} | {"PYTHONPATH": str(ROOT)}

    def cli(*a: str, timeout: float = 600) -> tuple[float, subprocess.CompletedProcess]:
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "sparktui", *a],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        return time.perf_counter() - t0, r

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparktui",
            "demo",
            "up",
            "--json",
            "--model-mb",
            str(args.demo_model_mb),
            "--link-mbps",
            str(args.demo_link_mbps),
            "--stream-mbps",
            str(args.demo_stream_mbps),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=ROOT,
    )
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise SystemExit("the demo did not start")
    demo = json.loads(line)
    times: dict[int, list[float]] = {k: [] for k in args.streams}
    whole: dict[int, list[float]] = {k: [] for k in args.streams}
    busy: dict[int, list[float]] = {k: [] for k in args.streams}
    used: dict[int, int] = {}
    try:
        copy = Path(demo["root"]) / "nodes" / "spark2" / "models" / Path(demo["model_path"]).name
        state = Path(demo["root"]) / "nodes" / "spark1" / "home" / remote.STATE_ROOT
        for _ in range(args.repeat):
            for k in args.streams:
                shutil.rmtree(copy, ignore_errors=True)
                shutil.rmtree(state, ignore_errors=True)
                b0 = box_busy()
                dt, r = cli(
                    "--config",
                    demo["config"],
                    "sync",
                    "model",
                    "--to",
                    "spark2",
                    "--wait",
                    "--json",
                    "--copy-streams",
                    str(k),
                )
                b1 = box_busy()
                busy[k].append((b1[0] - b0[0]) / max(1, b1[1] - b0[1]))
                if r.returncode != 0:
                    raise SystemExit(f"demo copy with {k} streams failed: {r.stdout[-400:]} {r.stderr[-400:]}")
                [d] = [p for p in state.iterdir() if (p / "rc").exists()]
                meta = json.loads((d / "meta.json").read_text())
                used[k] = meta.get("streams") or 1
                # the copy itself: from its job's start to its exit status (the demo's nodes share this clock)
                times[k].append((d / "rc").stat().st_mtime - (d / "meta.json").stat().st_mtime)
                whole[k].append(dt)
    finally:
        cli("demo", "down", demo["id"], timeout=120)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    nbytes = args.demo_model_mb * MB
    one = statistics.median(times[min(times)])
    rows = []
    for k, ts in times.items():
        t = statistics.median(ts)
        rate = nbytes / t / 1e6
        n = used.get(k, k)
        if rate >= 0.8 * args.demo_link_mbps:
            bound = "link"
        elif rate >= 0.8 * n * args.demo_stream_mbps:
            bound = "each stream's ceiling (one core's worth)"
        else:  # neither modelled bound: the demo's nodes, their sshd and every stream's start share this box's cores
            bound = f"this box's cores (busy {statistics.median(busy[k]) * 100:.0f} %)"
        rows.append(
            {
                "k": k,
                "streams": n,
                "seconds": t,
                "sync_seconds": statistics.median(whole[k]),
                "mb_per_s": rate,
                "x_one": one / t,
                "x_k_one_stream": (one / t) / n,
                "bound": bound,
            }
        )
    return {
        "link_mbps": args.demo_link_mbps,
        "stream_mbps": args.demo_stream_mbps,
        "mb": args.demo_model_mb,
        "rows": rows,
    }


def print_demo(d: dict) -> None:
    print(
        f"demo shared-link model: {d['mb']} MiB, link {d['link_mbps']:g} MB/s, one stream at most "
        f"{d['stream_mbps']:g} MB/s; the copy from its job's start to its end (whole `sync model --wait` after /)"
    )
    for r in d["rows"]:
        print(
            f"  --copy-streams {r['k']}: {r['streams']} stream(s) {r['seconds']:6.2f} s / {r['sync_seconds']:5.2f} s "
            f"{r['mb_per_s']:6.1f} MB/s "
            f"{r['x_one']:5.2f} x one stream ({r['x_k_one_stream']:.2f} x k*one)  bound: {r['bound']}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--shard-mb", type=int, default=118)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--sync", action="store_true", help="also `sync model --wait` end to end, baseline and now")
    ap.add_argument("--baseline", default="main", help="git revision of today's sparktui (default: main)")
    ap.add_argument("--options", action="store_true", help="also each option alone on today's command line")
    ap.add_argument("--no-lab", action="store_true", help="only the demo part (no root needed)")
    ap.add_argument("--demo", action="store_true", help="also on the demo's shared-link model")
    ap.add_argument("--demo-link-mbps", type=float, default=8.0)
    ap.add_argument("--demo-stream-mbps", type=float, default=2.0)
    ap.add_argument("--demo-model-mb", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = lab_bench(args)
    rows = summarise(res) if res else []
    out = {"lab": {k: v for k, v in res.items() if k != "runs"} | {"rows": rows}} if res else {}
    if args.demo:
        out["demo"] = demo_bench(args)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        if res:
            print_rows(res, rows)
        if args.demo:
            print_demo(out["demo"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
