"""The `ray` CLI: start (head or worker, --block or detached), status, stop.

Without --block, `ray start` leaves a detached process behind (like Ray's raylet and GCS daemons):
the command relays that process's output until it is up, then returns. Processes record their PIDs
under {TMPDIR}/ray/sparktui_sim_pids so that `ray stop` finds them.
"""

from __future__ import annotations

import argparse
import datetime
import os
import select
import signal
import subprocess
import sys
import time

from . import clock, netinfo, runtime
from .logfmt import emit, ray_cpp_line, ray_line
from .ray_gcs import (
    GcsClient,
    GcsServer,
    NcclEndpoint,
    current_cluster_path,
    new_node,
    node_resources,
    ray_dir,
    read_current_cluster,
    split_address,
)

VERSION = "2.49.2"
DAEMON_ENV = "SPARKTUI_SIM_RAY_DAEMON"
READY = "\x00sparktui-sim-ready"
# Ray 2.60 (seen in the lab): "Failed to connect to GCS" after 5 s, the observability pubsub 5 s later,
# "Failed to get cluster ID" 30 s after that, and the round again, without end. Ours stops after
# GCS_ROUNDS rounds so that no simulated worker dials forever.
GCS_WINDOW_S = 5.0
GCS_ROUND_S = 40.0
GCS_ROUNDS = 15
NODE_START_S = 30.0  # Ray 2.60: a raylet that never registers fails `ray start` after ~30 s


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ray", description="Ray command line interface (simulated engine).")
    p.add_argument("--version", action="version", version=f"ray, version {VERSION}")
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("start", help="Start Ray processes manually on the local machine.")
    s.add_argument("--head", action="store_true", help="provide this argument for the head node")
    s.add_argument("--address", help="the address to use for Ray")
    s.add_argument("--node-ip-address", help="the IP address of this node")
    s.add_argument("--port", type=int, default=6379, help="the port of the head ray process")
    s.add_argument("--block", action="store_true", help="provide this argument to block forever in this command")
    s.add_argument("--num-gpus", type=int, help="the number of GPUs on this node")
    s.add_argument("--num-cpus", type=int, help="the number of CPUs on this node")
    s.add_argument("--disable-usage-stats", action="store_true", help="disable the usage stats collection")
    s.add_argument("--dashboard-host", default="127.0.0.1", help="the host to bind the dashboard server to")
    s.add_argument("--dashboard-port", type=int, default=8265, help="the port to bind the dashboard server to")
    s.add_argument("--include-dashboard", default=None, help="start the Ray dashboard GUI")
    s.add_argument("--temp-dir", help="manually specify the root temporary dir of the Ray process")
    s.add_argument("--object-store-memory", type=int, help="the amount of memory (in bytes) for the object store")
    s.add_argument("--resources", help="a JSON serialized dictionary mapping resource name to resource quantity")
    st = sub.add_parser("status", help="Print cluster status, including autoscaling info.")
    st.add_argument("--address", help="override the address to connect to")
    st.add_argument("-v", "--verbose", action="store_true", help="show per-node resource usage")
    sp = sub.add_parser("stop", help="Stop Ray processes manually on the local machine.")
    sp.add_argument("-f", "--force", action="store_true", help="if set, ray will send SIGKILL instead of SIGTERM")
    sp.add_argument("-g", "--grace-period", type=int, default=16, help="seconds to wait before SIGKILL")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if unknown:
        emit(f"Warning: unrecognized arguments ignored: {' '.join(unknown)}", sys.stderr)
    if args.command == "status":
        return runtime.run(lambda: status(args))
    if args.command == "stop":
        return stop(args)
    if not args.head and not args.address:
        args.address = os.environ.get("RAY_ADDRESS")
        if not args.address:
            emit(
                "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to "
                "by setting `--address` flag or `RAY_ADDRESS` environment variable.",
                sys.stderr,
            )
            return 1
    if args.block or os.environ.get(DAEMON_ENV) == "1":
        return runtime.run(lambda: RayNode(args).run())
    return detach(argv if argv is not None else sys.argv[1:])


# -- ray start ---------------------------------------------------------------------------------
def detach(argv: list[str]) -> int:
    """Run the node in a detached process and relay its output until it reports being up."""
    env = dict(os.environ, **{DAEMON_ENV: "1"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparktui.sim.ray_cli", *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120 + clock.scaled(GCS_ROUND_S + GCS_WINDOW_S)
    buf = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode(errors="replace")
            if text == READY:
                return 0
            emit(text)
    if buf:
        emit(buf.decode(errors="replace"))
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return 1


class RayNode:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.daemon = os.environ.get(DAEMON_ENV) == "1"
        self.gcs: GcsServer | None = None
        self.client: GcsClient | None = None
        self.endpoint = NcclEndpoint()
        self.pidfile = os.path.join(ray_dir(), "sparktui_sim_pids", str(os.getpid()))
        self.wrote_cluster_file = False

    async def run(self) -> int:
        a = self.args
        ip = a.node_ip_address or netinfo.auto_ip() or "127.0.0.1"
        await clock.pause(1.5)
        if a.head and not a.disable_usage_stats and os.environ.get("RAY_USAGE_STATS_ENABLED") != "0":
            emit(
                "Usage stats collection is enabled. To disable this, add `--disable-usage-stats` to the command "
                "that starts the cluster, or run the following command: `ray disable-usage-stats` before starting "
                "the cluster. See https://docs.ray.io/en/master/cluster/usage-stats.html for more details."
            )
        emit(f"\nLocal node IP: {ip}")
        try:
            code = await (self.start_head(ip) if a.head else self.start_worker(ip))
            if code:
                return code
            self.write_pidfile()
            if a.head:
                self.print_head_started(ip)
            else:
                emit(
                    "\n--------------------\nRay runtime started.\n--------------------\n\n"
                    "To terminate the Ray runtime, run\n  ray stop"
                )
            if self.daemon:
                self.go_background()
            elif a.block:
                emit(
                    "\n--block\n  This command will now block forever until terminated by a signal.\n  Running "
                    "subprocesses are monitored and a message will be printed if any of them terminate "
                    "unexpectedly. Subprocesses exit with SIGTERM will be treated as graceful, thus NOT reported."
                )
            if a.head:
                await runtime.forever()
            assert self.client is not None
            await self.client.wait_closed()
            emit(
                "Some Ray subprocesses exited unexpectedly:\n  raylet [exit code=1]\n\n"
                "Remaining processes will be killed."
            )
            return 1
        finally:
            await self.cleanup()

    async def start_head(self, ip: str) -> int:
        a = self.args
        existing = read_current_cluster()
        if existing and await _gcs_alive(existing):
            emit(
                f"ConnectionError: Ray is trying to start at {ip}:{a.port}, but is already running at "
                f"{existing}. Please specify a different port using the `--port` flag of `ray start` command.",
                sys.stderr,
            )
            return 1
        self.gcs = GcsServer()
        try:
            await self.gcs.start(ip, a.port)
            await self.endpoint.start(ip)
        except OSError as e:
            ray_cpp_line(
                "C",
                "gcs_server_main.cc:146",
                f"Check failed: Failed to bind the GCS server to {ip}:{a.port}: [Errno {e.errno}] {e.strerror}",
            )
            emit(
                "\nERROR: GCS server failed to start. Check that the port is free and that the node IP "
                f"address {ip} belongs to this machine.",
                sys.stderr,
            )
            return 1
        self.gcs.add_local(new_node(ip, node_resources(a.num_gpus, a.num_cpus), self.endpoint.port, True))
        os.makedirs(ray_dir(), exist_ok=True)
        with open(current_cluster_path(), "w", encoding="utf-8") as f:
            f.write(f"{ip}:{a.port}")
        self.wrote_cluster_file = True
        return 0

    async def start_worker(self, ip: str) -> int:
        a = self.args
        address = a.address
        if address == "auto":
            address = read_current_cluster() or ""
        host, port = split_address(address)
        try:
            await self.endpoint.start(ip)
        except OSError:
            # Ray 2.60 says nothing of the address: its raylet never registers and the CLI gives up
            await clock.pause(NODE_START_S)
            ray_line("INFO", "node.py:438", "Failed to get node info b'RPC error: Deadline Exceeded'")
            emit(
                'Traceback (most recent call last):\n  File "ray/_private/node.py", line 440, in __init__\n'
                "    raise Exception(\nException: The current node timed out during startup. This could happen "
                "because some of the raylet failed to startup or the GCS has become overloaded.",
                sys.stderr,
            )
            return 1
        self.client = GcsClient()
        if not await self.reach_gcs(host, port):
            return 1
        node = new_node(ip, node_resources(a.num_gpus, a.num_cpus), self.endpoint.port, False)
        await self.client.request({"op": "register", "node": node})
        return 0

    async def reach_gcs(self, host: str, port: int) -> bool:
        """Ray 2.60's rounds of tries at the head's GCS, each reported as it does; False when ours stop."""
        assert self.client is not None
        steps = [
            (GCS_WINDOW_S, "rpc_client.h:153", f"Failed to connect to GCS at address {host}:{port} within 5 seconds."),
            (
                GCS_WINDOW_S,
                "rpc_client.h:638",
                f"Failed to connect to the observability pubsub at address {host}:{port} within 5 seconds.",
            ),
            (
                GCS_ROUND_S - 2 * GCS_WINDOW_S,
                "gcs_client.cc:210",
                "Failed to get cluster ID from GCS server: TimedOut: Timed out while waiting for GCS to become available.",
            ),
        ]
        for _ in range(GCS_ROUNDS):
            for window, where, message in steps:
                try:
                    await self.client.connect(host, port, time.monotonic() + clock.scaled(window))
                    return True
                except TimeoutError:
                    ray_cpp_line("W", where, message)
        return False

    def print_head_started(self, ip: str) -> None:
        a = self.args
        emit(
            "\n--------------------\nRay runtime started.\n--------------------\n\nNext steps\n"
            f"  To add another node to this Ray cluster, run\n    ray start --address='{ip}:{a.port}'\n\n"
            f"  To connect to this Ray cluster:\n    import ray\n    ray.init(_node_ip_address='{ip}')\n\n"
            "  To submit a Ray job using the Ray Jobs CLI:\n"
            f"    RAY_ADDRESS='http://{a.dashboard_host}:{a.dashboard_port}' ray job submit --working-dir . -- "
            "python my_script.py\n\n"
            "  See https://docs.ray.io/en/latest/cluster/running-applications/job-submission/index.html \n"
            "  for more information on submitting Ray jobs to the Ray cluster.\n\n"
            "  To terminate the Ray runtime, run\n    ray stop\n\n"
            "  To view the status of the cluster, use\n    ray status\n\n"
            f"  To monitor and debug Ray, view the dashboard at \n    {a.dashboard_host}:{a.dashboard_port}\n\n"
            "  If connection to the dashboard fails, check your firewall settings and network configuration."
        )

    def go_background(self) -> None:
        """Tell the relaying `ray start` we are up, then log to Ray's log directory instead."""
        emit(READY)
        logs = os.path.join(ray_dir(), "session_latest", "logs")
        os.makedirs(logs, exist_ok=True)
        fd = os.open(os.path.join(logs, "raylet.out"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)

    def write_pidfile(self) -> None:
        os.makedirs(os.path.dirname(self.pidfile), exist_ok=True)
        with open(self.pidfile, "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))

    async def cleanup(self) -> None:
        if self.client is not None:
            self.client.close()
        await self.endpoint.close()
        if self.gcs is not None:
            await self.gcs.close()
        for path in [self.pidfile] + ([current_cluster_path()] if self.wrote_cluster_file else []):
            try:
                os.unlink(path)
            except OSError:
                pass


async def _gcs_alive(address: str) -> bool:
    host, port = split_address(address)
    client = GcsClient()
    try:
        await client.connect(host, port, time.monotonic() + 1.0)
        await client.request({"op": "nodes"})
        return True
    except (OSError, TimeoutError, ConnectionError):
        return False
    finally:
        client.close()


# -- ray status ---------------------------------------------------------------------------------
def resolve_address(explicit: str | None) -> str | None:
    addr = explicit or os.environ.get("RAY_ADDRESS") or "auto"
    return read_current_cluster() if addr == "auto" else addr


async def status(args: argparse.Namespace) -> int:
    address = resolve_address(args.address)
    if not address:
        emit(
            "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by "
            "setting `--address` flag or `RAY_ADDRESS` environment variable.",
            sys.stderr,
        )
        return 1
    host, port = split_address(address)
    client = GcsClient()
    try:
        await client.connect(host, port, time.monotonic() + clock.scaled(GCS_WINDOW_S))
        reply = await client.request({"op": "nodes"})
    except (TimeoutError, OSError, ConnectionError):
        ray_cpp_line("W", "rpc_client.h:153", f"Failed to connect to GCS at address {host}:{port} within 5 seconds.")
        return 1
    finally:
        client.close()
    emit(format_status(reply.get("nodes") or [], reply.get("used") or {}, args.verbose))
    return 0


def format_memory(n: float) -> str:
    if n <= 0:
        return "0B"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{int(n)}B"


def format_status(nodes: list[dict], used_gpus: dict[str, float], verbose: bool = False) -> str:
    bar = "-" * 63
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    lines = [f"======== Autoscaler status: {stamp} ========", "Node status", bar, "Active:"]
    lines += [f" 1 node_{n['node_id']}" for n in nodes] or [" (no active nodes)"]
    lines += [
        "Pending:",
        " (no pending nodes)",
        "Recent failures:",
        " (no failures)",
        "",
        "Resources",
        bar,
        "Total Usage:",
    ]
    total = {
        k: sum(float(n["resources"].get(k, 0)) for n in nodes) for k in ("CPU", "GPU", "memory", "object_store_memory")
    }
    gpu_used = sum(used_gpus.values())
    lines += [
        f" 0.0/{total['CPU']:.1f} CPU",
        f" {gpu_used:.1f}/{total['GPU']:.1f} GPU",
        f" 0B/{format_memory(total['memory'])} memory",
        f" 0B/{format_memory(total['object_store_memory'])} object_store_memory",
        "",
        "Total Constraints:",
        " (no request_resources() constraints)",
        "Total Demands:",
        " (no resource demands)",
    ]
    if verbose:
        for n in nodes:
            r = n["resources"]
            lines += [
                "",
                f"Node: {n['node_id']} ({n['ip']})",
                " Usage:",
                f"  0.0/{float(r.get('CPU', 0)):.1f} CPU",
                f"  {used_gpus.get(n['node_id'], 0.0):.1f}/{float(r.get('GPU', 0)):.1f} GPU",
                f"  0B/{format_memory(float(r.get('memory', 0)))} memory",
                f"  0B/{format_memory(float(r.get('object_store_memory', 0)))} object_store_memory",
            ]
    return "\n".join(lines)


# -- ray stop ----------------------------------------------------------------------------------
def _our_pids() -> list[int]:
    folder = os.path.join(ray_dir(), "sparktui_sim_pids")
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    have_proc = os.path.isdir("/proc/self")  # a bare chroot has no /proc
    pids = []
    for name in names:
        try:
            pid = int(name)
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        if have_proc:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    ours = b"ray" in f.read()  # never signal a process that merely reused the PID
            except OSError:
                ours = None
        else:
            try:
                os.kill(pid, 0)
                ours = True
            except ProcessLookupError:
                ours = None
            except PermissionError:
                ours = False
        if ours is None:
            try:
                os.unlink(os.path.join(folder, name))  # record of a process that is gone
            except OSError:
                pass
        elif ours:
            pids.append(pid)
    return pids


def stop(args: argparse.Namespace) -> int:
    pids = _our_pids()
    if not pids:
        emit("Did not find any active Ray processes.")
        return 0
    sig = signal.SIGKILL if args.force else signal.SIGTERM
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + max(0, args.grace_period)
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if _alive(p)]
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    emit(f"Stopped all {len(pids)} Ray processes.")
    return 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited already
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return False
    except OSError:
        return False
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
