"""k copy streams on a host that has the cores for them: sparktui's copy job with 1..k streams, same run.

    python bench/transfer_cores.py [--shards 16] [--shard-mb 256] [--streams 1 2 4 8] [--repeat 3] [--json]

bench/transfer.py needs the lab (namespaces, a fabric veth) and runs on a 2-core box, where a second
stream only takes the first one's core. This one needs only OpenSSH and rsync, so it also runs on a
many-core machine: one sshd on 127.0.0.1 (its own host key, verified, and its own user key) stands for
the destination node, a directory for each node's disk. Every method copies the same shards, median of
--repeat:
  raw-tcp-xN   python3 sendfile over N loopback TCP connections at once (N: each stream count asked for),
               each into one file: the ceiling of this host's "link" at N streams (loopback has no line rate)
  write-xC     C plain writers of the same bytes at once: the destination's disk (page cache) ceiling
  today        the rsync command line sparktui ran before parallel streams (remote.rsync_job: ssh's default
               cipher): the baseline of the CPU column
  sparktui-kN  sparktui's copy job (streams.job) with N streams, the cipher cipher.choose picks
--split-nodes gives each end its own half of this host's physical cores (SMT siblings kept together),
as two nodes have: the client side (this process and its children: sh, rsync, ssh, the raw senders)
on one half, the sshd standing for the destination (and the raw receivers and writers) on the other.
CPU-s/GB counts both ends: the copy's client side (this process's reaped children: sh, rsync, ssh) and the
sshd standing for the destination (its own and its reaped sessions' CPU: sshd, the receiving rsyncs), read
once the sessions are gone, so nothing else on the host is counted.
Each row names its bound: the link (>= 80 % of raw TCP over as many connections), the destination's
writes (>= 80 % of the plain write), the cores (busy >= 90 %, or k streams needing >= 85 % of them at
one stream's measured share: of this host, whose cores both ends share, or with --split-nodes of the
busier node), else the streams. `x k*one` is the rate over k times one stream's: the parallel copy's
goal is >= 0.8 until a ceiling; `x raw k` is the rate over raw TCP's with k connections.
Talks only to 127.0.0.1. Needs sshd, ssh, ssh-keygen and rsync on PATH (as root, the `sshd` user
for privilege separation, as OpenSSH requires).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    from sparktui.core.transfers import cipher, streams  # noqa: E402
except ImportError:  # a GPU host without sparktui's dependencies: the copy job's modules need only the stdlib
    import types

    _pkg = types.ModuleType("sparktui.core.transfers")
    _pkg.__path__ = [str(ROOT / "sparktui" / "core" / "transfers")]
    sys.modules["sparktui.core.transfers"] = _pkg
    from sparktui.core.transfers import cipher, streams  # noqa: E402
from bench.copyprogs import RECEIVER, SENDER, WRITER  # noqa: E402
from sparktui.core.transfers import remote  # noqa: E402
from sparktui.core.transfers.options import TransferOptions  # noqa: E402

MB = 1 << 20
GB = 1e9


def box_busy(cpus: frozenset[int] | None = None) -> tuple[int, int]:
    """(busy, total) jiffies of the whole host, or of the CPUs in `cpus` summed."""
    busy = total = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *rest = line.split()
            if not name.startswith("cpu"):
                break
            if (cpus is None) != (name == "cpu") or (cpus is not None and int(name[3:]) not in cpus):
                continue
            v = [int(x) for x in rest]
            busy, total = busy + sum(v) - v[3] - v[4], total + sum(v)
    return busy, total


def node_halves() -> tuple[frozenset[int], frozenset[int]]:
    """This host's CPUs in two halves by physical core, SMT siblings kept in the same half."""
    cores: dict[tuple[str, str], set[int]] = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            key = ((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip())
        except OSError:
            key = ("?", str(cpu))
        cores.setdefault(key, set()).add(cpu)
    groups = sorted(cores.values(), key=min)
    if len(groups) < 2:
        raise SystemExit("--split-nodes needs at least two physical cores")
    half = len(groups) // 2
    return (frozenset().union(*groups[:half]), frozenset().union(*groups[half:]))


def smt() -> int:
    """Hardware threads per physical core on this host (1 without SMT)."""
    try:
        sib = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").read_text().strip()
    except OSError:
        return 1
    n = 0
    for part in sib.split(","):
        a, _, b = part.partition("-")
        n += int(b or a) - int(a) + 1
    return n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Host:
    """One sshd on 127.0.0.1 with its own keys; the ssh command line that reaches it, host key checked."""

    def __init__(self, d: Path, cpus: frozenset[int] | None = None):
        self.d = d
        self.port = free_port()
        for name in ("host", "user"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
        (d / "authorized_keys").write_text((d / "user.pub").read_text())
        pub = (d / "host.pub").read_text().split()
        (d / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        (d / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            f"PidFile {d / 'sshd.pid'}\nMaxStartups 64\nMaxSessions 64\n"
        )
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        if os.geteuid() == 0:  # as root, OpenSSH's privilege separation chroots there (Debian's service makes it)
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.proc = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.PIPE, text=True, preexec_fn=pin(cpus)
        )
        self.ssh = (
            f"ssh -i {d / 'user'} -p {self.port} -o UserKnownHostsFile={d / 'known_hosts'} -o StrictHostKeyChecking=yes"
        )
        deadline = time.monotonic() + 20
        while True:  # bounded: sshd listens within a moment or the bench stops
            r = subprocess.run(
                [*shlex.split(self.ssh), "-o", "BatchMode=yes", "root@127.0.0.1", "true"],
                capture_output=True,
                text=True,
            )
            if r.returncode == 0:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise SystemExit(f"sshd did not take a login: {r.stderr.strip()} {self.err()}")
            time.sleep(0.2)

    def err(self) -> str:
        if self.proc.poll() is None:
            return ""
        return (self.proc.stderr.read() or "")[-400:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def pin(cpus: frozenset[int] | None):
    """A preexec_fn that keeps a child (and what it starts) on `cpus`; None: anywhere."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


class LocalRunner:
    """cipher.choose talks to the sending node through .run(); here that node is this host."""

    name = "this host"

    async def run(self, cmd: str, timeout: float = 60):
        r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)

        class R:
            ok = r.returncode == 0
            exit_status = r.returncode
            stdout = r.stdout
            stderr = r.stderr

        return R()


def make_shards(src: Path, shards: int, shard_mb: int) -> int:
    """Incompressible shards (a random block, each shard with its own header so no two are alike)."""
    (src / "shards").mkdir(parents=True)
    block = os.urandom(16 * MB)
    for i in range(shards):
        with open(src / "shards" / f"model-{i + 1:05d}.safetensors", "wb") as f:
            f.write(os.urandom(4096))
            left = shard_mb * MB - 4096
            while left > 0:
                n = min(left, len(block))
                f.write(block[:n])
                left -= n
    return shards * shard_mb * MB


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def proc_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of one process: its own CPU and its reaped descendants'."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().split()
    except OSError:
        return []


def settled(pid: int, limit: float = 20.0) -> None:
    """Wait (bounded) until sshd has reaped every session, so their CPU is in its cutime/cstime."""
    end = time.monotonic() + limit
    while children(pid) and time.monotonic() < end:
        time.sleep(0.05)


def client_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(fn, sshd: int, halves: tuple[frozenset[int], ...] = ()) -> tuple[float, float, float]:
    """(seconds, share busy of the host or of its busier half, CPU seconds of both ends)."""
    sets = halves or (None,)
    settled(sshd)
    c0 = client_cpu() + proc_cpu(sshd)
    b0 = [box_busy(c) for c in sets]
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    b1 = [box_busy(c) for c in sets]
    settled(sshd)
    share = max((x[0] - y[0]) / max(1, x[1] - y[1]) for x, y in zip(b1, b0))
    return dt, share, client_cpu() + proc_cpu(sshd) - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--shard-mb", type=int, default=256)
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the two nodes' disks go (default: a temporary directory)")
    ap.add_argument(
        "--split-nodes", action="store_true", help="each end on its own half of the physical cores, as two nodes"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    halves = node_halves() if args.split_nodes else ()
    near, far = halves if halves else (None, None)
    base = Path(tempfile.mkdtemp(prefix="sparktui-cores-", dir=args.dir))
    host = None
    try:
        src, dst, state, keys = base / "node1", base / "node2", base / "state", base / "keys"
        for d in (dst, state, keys):
            d.mkdir()
        nbytes = make_shards(src, args.shards, args.shard_mb)
        host = Host(keys, far)
        if near is not None:
            os.sched_setaffinity(0, near)  # the client side: this process and every child it starts
        opts = TransferOptions(ssh=host.ssh, connect_timeout=5)
        choice = asyncio.run(cipher.choose(LocalRunner(), "root", "127.0.0.1", opts))
        ssh = streams.remote.ssh_command(opts.ssh, opts.connect_timeout, choice.ciphers)
        sizes = {f"shards/{p.name}": p.stat().st_size for p in (src / "shards").iterdir()}

        conns = max(1, min(max(args.streams), args.shards))

        def raw(n: int):
            parts = [sorted(str(p) for p in (src / "shards").iterdir())[i::n] for i in range(n)]

            def run() -> None:
                recvs = [
                    subprocess.Popen(
                        [sys.executable, "-c", RECEIVER, "127.0.0.1", "0", str(dst / f"raw.{i}")],
                        stdout=subprocess.PIPE,
                        text=True,
                        preexec_fn=pin(far),
                    )
                    for i in range(n)
                ]
                ports = [r.stdout.readline().strip() for r in recvs]
                sends = [
                    subprocess.Popen([sys.executable, "-c", SENDER, "127.0.0.1", port, *files])
                    for port, files in zip(ports, parts)
                ]
                for p in (*sends, *recvs):
                    if p.wait(900) != 0:
                        raise SystemExit("a raw TCP copy failed")
                assert dir_bytes(dst) == nbytes

            return run

        def write() -> None:
            each = nbytes // MB // conns
            ws = [
                subprocess.Popen([sys.executable, "-c", WRITER, str(dst / f"w.{i}"), str(each)], preexec_fn=pin(far))
                for i in range(conns)
            ]
            for w in ws:
                if w.wait(900) != 0:
                    raise SystemExit("a plain write failed")

        def copy(k: int):
            p = streams.plan(sizes, {}, k)
            job = streams.job(p, str(src), "root", "127.0.0.1", str(dst), ssh, opts.io_timeout)
            files = streams.state_files(p)

            def run() -> None:
                shutil.rmtree(state, ignore_errors=True)
                state.mkdir()
                for name, text in files.items():
                    (state / name).write_text(text)
                r = subprocess.run(["sh", "-c", job], cwd=state, capture_output=True, text=True, timeout=1800)
                if r.returncode != 0:
                    raise SystemExit(f"copy with {k} streams failed (exit {r.returncode}): {r.stderr[-600:]}")
                got = dir_bytes(dst / "shards")
                assert got == nbytes, f"{k} streams copied {got} of {nbytes} bytes"

            return p.count, run

        def today() -> None:
            r = subprocess.run(
                [
                    "sh",
                    "-c",
                    remote.rsync_job(
                        str(src), "root", "127.0.0.1", str(dst), opts.ssh, opts.connect_timeout, opts.io_timeout
                    ),
                ],
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if r.returncode != 0:
                raise SystemExit(f"today's copy failed (exit {r.returncode}): {r.stderr[-600:]}")
            assert dir_bytes(dst / "shards") == nbytes

        # the link's ceiling at each stream count: as many raw TCP connections at once as the copy has streams
        raws = {n: f"raw-tcp-x{n}" for n in sorted({max(1, min(k, args.shards)) for k in args.streams})}
        raw_m, write_m = raws[max(raws)], f"write-x{conns}"
        methods = {m: (n, raw(n)) for n, m in raws.items()}
        methods.update({write_m: (conns, write), "today": (1, today)})
        for k in args.streams:
            n, fn = copy(k)
            methods[f"sparktui-k{n}"] = (n, fn)
        times: dict[str, list[float]] = {m: [] for m in methods}
        busy: dict[str, list[float]] = {m: [] for m in methods}
        cpu: dict[str, list[float]] = {m: [] for m in methods}
        for _ in range(args.repeat):
            for m, (_, fn) in methods.items():
                shutil.rmtree(dst, ignore_errors=True)
                dst.mkdir()
                dt, b, c = timed(fn, host.proc.pid, halves)
                times[m].append(dt)
                busy[m].append(b)
                cpu[m].append(c / (nbytes / GB))
        rate = {m: nbytes / statistics.median(ts) / GB for m, ts in times.items()}
        one = next((r for m, r in rate.items() if m == "sparktui-k1"), None)
        # one stream keeps this many cores busy (sender's rsync and ssh, sshd and the receiver's rsyncs:
        # both ends, or with --split-nodes the busier node's), so k streams need k times that
        cores = len(halves[0]) if halves else (os.cpu_count() or 1)
        need = statistics.median(busy["sparktui-k1"]) * cores if "sparktui-k1" in busy else None
        rows = []
        base_cpu = statistics.median(cpu["today"])
        for m, (n, _) in methods.items():
            bz = statistics.median(busy[m])
            link = rate[raws[n]] if n in raws else rate[raw_m]
            if m in (*raws.values(), write_m, "today"):
                bound = "-"
            elif rate[m] >= 0.8 * link:
                bound = "link"
            elif rate[m] >= 0.8 * rate[write_m]:
                bound = "destination writes"
            elif bz >= 0.9 or (need is not None and n * need >= 0.85 * cores):
                bound = "cores of a node" if halves else "cores of this host"
            else:
                bound = "the streams"
            xk = rate[m] / (n * one) if one and m.startswith("sparktui-k") else None
            rows.append(
                {
                    "method": m,
                    "streams": n,
                    "gbps": rate[m],
                    "x_one": rate[m] / one if one else None,
                    "x_k_one_stream": xk,
                    "busy": bz,
                    "bound": bound,
                    "cores_needed": n * need if need is not None and m.startswith("sparktui-k") else None,
                    "cpu_s_per_gb": statistics.median(cpu[m]),
                    "x_raw_same_k": rate[m] / link if m.startswith("sparktui-k") else None,
                    "cpu_x_today": statistics.median(cpu[m]) / base_cpu if m not in (*raws.values(), write_m) else None,
                }
            )
        out = {
            "bytes": nbytes,
            "cores": os.cpu_count(),
            "threads_per_core": smt(),
            "node_cpus": [sorted(h) for h in halves] or None,
            "cipher": choice.cipher,
            "cipher_note": choice.note,
            "repeat": args.repeat,
            "rows": rows,
        }
        if args.json:
            print(json.dumps(out, indent=1))
        else:
            where = f"each end on {len(halves[0])} / {len(halves[1])} of them" if halves else "both ends share them"
            print(
                f"{nbytes / GB:.2f} GB in {args.shards} shards over 127.0.0.1; this host has {out['cores']} cores "
                f"({out['threads_per_core']} threads per physical core; {where}); "
                f"cipher {choice.cipher or 'ssh default'}"
                + (f" ({choice.note})" if choice.note else "")
                + f"; median of {args.repeat}"
            )
            print(
                f"{'method':<14} {'GB/s':>7} {'x one':>6} {'x k*one':>8} {'x raw k':>8} {'busy':>5} "
                f"{'cores k*one':>11} {'CPU-s/GB':>9} {'x today':>8}  bound"
            )
            for r in rows:
                xo = f"{r['x_one']:.2f}" if r["x_one"] is not None and r["method"].startswith("sparktui") else "-"
                xk = f"{r['x_k_one_stream']:.2f}" if r["x_k_one_stream"] is not None else "-"
                cn = f"{r['cores_needed']:.1f}" if r["cores_needed"] is not None else "-"
                xt = f"{r['cpu_x_today']:.2f}" if r["cpu_x_today"] is not None else "-"
                xr = f"{r['x_raw_same_k']:.2f}" if r["x_raw_same_k"] is not None else "-"
                print(
                    f"{r['method']:<14} {r['gbps']:7.3f} {xo:>6} {xk:>8} {xr:>8} {r['busy'] * 100:4.0f}% {cn:>11} "
                    f"{r['cpu_s_per_gb']:9.2f} {xt:>8}  {r['bound']}"
                )
        return 0
    finally:
        if host is not None:
            host.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
