"""OpenMPI's `mpirun` (ssh launcher), `trtllm-llmapi-launch` and the containers' `sshd`, as seen from outside.

mpirun reads the hostfile (--hostfile or OMPI_MCA_orte_default_hostfile); the first host is this one and runs
rank 0 locally (sparktui's plans put the head first). For every other host it dials the SSH port of
`--mca plm_rsh_args "-p PORT ..."` (22 by default) as its ssh launcher would, and asks that container's sshd to
start rank R. When a host does not answer, ssh waits out the TCP connect (no output: the launch hangs) and
then fails with ssh's words and OpenMPI's "ORTE was unable to reliably start one or more daemons." (the text as
OpenMPI prints it, e.g. horovod/horovod docs/troubleshooting.rst); a refused port fails at once the same way.
Once every daemon is up, rank 0 runs the command (trtllm-llmapi-launch ...) with OMPI_COMM_WORLD_RANK/SIZE.
A remote rank whose connection drops ends the job ("ORTE has lost communication with a remote daemon.").

The sshd here speaks one JSON line per launch, not SSH: it prints the remote rank's lines into its container
log (trtllm-llmapi-launch's worker branch, the C++ runtime's MPI line) and holds the rank while mpirun does.
Every wait is bounded: connects by SSH_CONNECT_S engine seconds, the job by the processes' own lifetimes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import shlex
import subprocess
import sys

from . import clock, collective, runtime
from .logfmt import emit
from .trtllm_args import VERSION

STEP_PEERS_ENV = "SPARKTUI_SIM_STEP_PEERS"
SSH_CONNECT_S = 127.0  # Linux's SYN retries before connect() gives up, what ssh waits without ConnectTimeout
ORTE_DAEMONS = """--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* not finding the required libraries and/or binaries on
  one or more nodes. Please check your PATH and LD_LIBRARY_PATH
  settings, or configure OMPI with --enable-orterun-prefix-by-default

* lack of authority to execute on one or more specified nodes.
  Please verify your allocation and authorities.

* the inability to write startup files into /tmp (--tmpdir/orte_tmpdir_base).
  Please check with your sys admin to determine the correct location to use.

*  compilation of the orted with dynamic libraries when static are required
  (e.g., on Cray). Please check your configure cmd line and consider using
  one of the contrib/platform definitions for your system type.

* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
--------------------------------------------------------------------------"""
# OpenMPI 4's words when a rank exits non-zero (quoted in many public threads, e.g. NCCL-tests issues).
RANK_FAILED = """--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[{job},1],{rank}]
  Exit code:    {code}
--------------------------------------------------------------------------"""
# Open MPI 4.1.4's own words (apt's openmpi-bin, run as root without the override; a missing hostfile).
AS_ROOT = """--------------------------------------------------------------------------
mpirun has detected an attempt to run as root.

Running as root is *strongly* discouraged as any mistake (e.g., in
defining TMPDIR) or bug can result in catastrophic damage to the OS
file system, leaving your system in an unusable state.

We strongly suggest that you run mpirun as a non-root user.

You can override this protection by adding the --allow-run-as-root option
to the cmd line or by setting two environment variables in the following way:
the variable OMPI_ALLOW_RUN_AS_ROOT=1 to indicate the desire to override this
protection, and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 to confirm the choice and
add one more layer of certainty that you want to do so.
We reiterate our advice against doing so - please proceed at your own risk.
--------------------------------------------------------------------------"""
NO_HOSTFILE = """--------------------------------------------------------------------------
Open RTE was unable to open the hostfile:
    {path}
Check to make sure the path and filename are correct.
--------------------------------------------------------------------------"""
ORTE_LOST = """--------------------------------------------------------------------------
ORTE has lost communication with a remote daemon.
--------------------------------------------------------------------------"""


def err(text: str) -> None:
    emit(text, sys.stderr)


def nccl_iface_problem(env=None) -> list[str]:
    """NCCL's lines when NCCL_SOCKET_IFNAME selects no interface of this node (its bootstrap then fails);
    [] when it selects one or is unset. Forms as NCCL prints them (see vllm_ray.py, which does the same)."""
    from . import netinfo
    from .ray_env import ifname_matches

    env = os.environ if env is None else env
    want = str(env.get("NCCL_SOCKET_IFNAME", "")).strip()
    try:
        names = [i.name for i in netinfo.interfaces()]
    except (OSError, ValueError):
        return []
    if not want or not names or ifname_matches(want, names):
        return []
    host = os.uname().nodename
    pid = os.getpid()
    return [
        f"{host}:{pid}:{pid} [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to {want}",
        f"{host}:{pid}:{pid} [0] NCCL WARN Bootstrap : no socket interface found",
    ]


# ---- mpirun -----------------------------------------------------------------------------------


def parse_mpirun(argv: list[str]) -> dict:
    """The options sparktui plans (and the playbook's -x), then the command."""
    o = {
        "np": None,
        "hostfile": os.environ.get("OMPI_MCA_orte_default_hostfile"),
        "mca": {},
        "x": [],
        "cmd": [],
        "root_ok": all(os.environ.get(k) == "1" for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")),
    }
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-np", "-n", "--np"):
            o["np"] = int(argv[i + 1])
            i += 2
        elif a in ("--hostfile", "-hostfile", "--machinefile"):
            o["hostfile"] = argv[i + 1]
            i += 2
        elif a in ("--mca", "-mca"):
            o["mca"][argv[i + 1]] = argv[i + 2]
            i += 3
        elif a == "-x":
            o["x"].append(argv[i + 1])
            i += 2
        elif a == "--map-by":
            i += 2
        elif a == "--allow-run-as-root":
            o["root_ok"] = True
            i += 1
        elif a in ("--oversubscribe", "--bind-to"):
            i += 2 if a == "--bind-to" else 1
        elif a.startswith("-"):
            err(f"mpirun: Error: unknown option \"{a}\"\nType 'mpirun --help' for usage.")
            raise SystemExit(1)
        else:
            o["cmd"] = argv[i:]
            break
    return o


def ssh_port(rsh_args: str) -> int:
    words = shlex.split(rsh_args or "")
    for i, w in enumerate(words[:-1]):
        if w == "-p":
            return int(words[i + 1])
    return 22


async def launch_remote(host: str, port: int, rank: int, size: int, cmd: list[str]):
    """Connect to the host's sshd and start one rank; returns the open connection (the rank lives with it)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), clock.scaled(SSH_CONNECT_S))
    except asyncio.TimeoutError:
        raise ConnectionError(f"ssh: connect to host {host} port {port}: Connection timed out") from None
    except ConnectionRefusedError:
        raise ConnectionError(f"ssh: connect to host {host} port {port}: Connection refused") from None
    except OSError as e:
        raise ConnectionError(f"ssh: connect to host {host} port {port}: {e.strerror or e}") from None
    writer.write((json.dumps({"rank": rank, "size": size, "cmd": cmd}) + "\n").encode())
    await writer.drain()
    try:
        line = await asyncio.wait_for(reader.readline(), clock.scaled(SSH_CONNECT_S))
    except asyncio.TimeoutError:
        writer.close()
        raise ConnectionError(
            f"Connection timed out during banner exchange\nConnection to {host} port {port} timed out"
        ) from None
    if line.strip() != b"ok":
        raise ConnectionError(line.decode(errors="replace").strip() or f"ssh: {host}: connection closed")
    return reader, writer


async def mpirun(argv: list[str]) -> int:
    o = parse_mpirun(argv)
    if os.geteuid() == 0 and not o["root_ok"]:
        err(AS_ROOT)
        return 1
    if not o["cmd"]:
        err("No executable was specified on the mpirun command line.")
        return 1
    try:
        with open(o["hostfile"] or "", encoding="utf-8") as f:
            hosts = [ln.split()[0] for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    except OSError:
        err(NO_HOSTFILE.format(path=o["hostfile"]))
        return 1
    size = o["np"] or len(hosts)
    port = ssh_port(o["mca"].get("plm_rsh_args", ""))
    links = []
    try:
        for rank, host in enumerate(hosts[1:size], start=1):
            links.append(await launch_remote(host, port, rank, size, o["cmd"]))
    except ConnectionError as e:
        err(str(e))
        err(ORTE_DAEMONS)
        return 1
    env = dict(os.environ, OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE=str(size), OMPI_COMM_WORLD_LOCAL_RANK="0")
    # where rank 0's engine finds the other ranks for its per-step all-reduce (the simulator's stand-in for NCCL's
    # own connections between the ranks, which the real job sets up by itself)
    env[STEP_PEERS_ENV] = ",".join(f"{h}:{port}" for h in hosts[1:size])
    # the local rank in a process group of its own, ended whole with the job: Open MPI tears down every
    # rank's process tree when mpirun ends, so no rank (nor the server trtllm-llmapi-launch started) outlives it
    proc = await asyncio.create_subprocess_exec(*o["cmd"], env=env, start_new_session=True)
    watchers = [asyncio.ensure_future(r.read()) for r, _ in links]  # "exit N" or EOF: that rank or daemon ended
    waiter = asyncio.ensure_future(proc.wait())
    job = os.getpid() % 65536
    try:
        done, _ = await asyncio.wait([waiter, *watchers], return_when=asyncio.FIRST_COMPLETED)
        if waiter in done:
            if proc.returncode:
                err(RANK_FAILED.format(job=job, rank=0, code=proc.returncode))
            return proc.returncode or 0
        first = next(w for w in watchers if w in done)
        said = first.result().decode(errors="replace").split()
        if said[:1] == ["exit"] and len(said) > 1:
            err(RANK_FAILED.format(job=job, rank=watchers.index(first) + 1, code=said[1]))
        else:
            err(ORTE_LOST)
        _end_group(proc)
        await asyncio.wait_for(proc.wait(), 10)
        return 1
    except asyncio.CancelledError:
        _end_group(proc)
        raise
    finally:
        for w in watchers:
            w.cancel()
        for _, writer in links:
            writer.close()


def _end_group(proc) -> None:
    """SIGTERM to the rank's whole process group (the rank itself may be gone while its server lives on)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def mpirun_main(argv: list[str] | None = None) -> int:
    return runtime.run(lambda: mpirun(sys.argv[1:] if argv is None else argv))


# ---- trtllm-llmapi-launch ---------------------------------------------------------------------


def launch_main(argv: list[str] | None = None) -> int:
    """Rank 0 runs the command (its MPI variables removed, as the script does) beside the MPI leader."""
    cmd = sys.argv[1:] if argv is None else argv
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
    size = os.environ.get("OMPI_COMM_WORLD_SIZE", "1")
    err(f"mpi_rank: {rank}")
    err(f"tllm_mpi_size: {size}")
    if rank != "0":
        err(f"rank{rank} run mgmn worker node with mpi_world_size: {size} ...")
        return 0
    err(f"rank0 run {' '.join(cmd)} in background")
    err(f"rank0 run mgmn leader node with mpi_world_size: {size} ...")
    err(f"rank0 host: {os.uname().nodename}")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_", "MPI_", "UCX_"))
    }
    env["tllm_mpi_size"] = size
    env["TLLM_SPAWN_PROXY_PROCESS"] = "1"
    try:
        return subprocess.call(cmd, env=env)
    except FileNotFoundError:
        err(f"{cmd[0] if cmd else ''}: command not found")
        return 127
    except KeyboardInterrupt:
        return 130


# ---- sshd ---------------------------------------------------------------------------------------


def parse_sshd(argv: list[str]) -> int:
    port = 22
    i = 0
    while i < len(argv):
        if argv[i] == "-p":
            port = int(argv[i + 1])
            i += 2
        elif argv[i] in ("-o", "-f", "-h"):
            i += 2
        else:
            i += 1
    return port


def listen_addresses(host: str = "0.0.0.0") -> list[str]:
    """Where sshd listens: every address (0.0.0.0), as sshd does without ListenAddress. On a simulated node that
    shares its kernel with others (SPARKTUI_SIM_INTERFACES, the demo) "every address" is the node's own
    addresses, lo aside: each node's sshd then holds the port on its own addresses, as in a network namespace."""
    from . import netinfo

    if host not in ("0.0.0.0", "") or not netinfo.overridden():
        return [host]
    own = [i.address for i in netinfo.interfaces() if not i.loopback]
    return own or [host]


async def serve_ranks(port: int, host: str = "0.0.0.0") -> None:
    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            first = await reader.readline()
            if not first.strip():
                return  # a bare TCP connect (the plan's wait for this port): no login, no rank
            req = json.loads(first)
            if req.get("op") == "steps":  # rank 0's engine: this rank's share of every step's all-reduce
                await collective.answer_steps(reader, writer)
                return
            rank, size = int(req.get("rank", 0)), int(req.get("size", 1))
            emit(f"mpi_rank: {rank}")
            emit(f"tllm_mpi_size: {size}")
            emit(f"rank{rank} run mgmn worker node with mpi_world_size: {size} ...")
            emit(f"[TensorRT-LLM] TensorRT-LLM version: {VERSION}")
            emit(f"[TensorRT-LLM][INFO] MPI size: {size}, MPI local size: 1, rank: {rank}")
            writer.write(b"ok\n")
            await writer.drain()
            # the rank runs with this container's environment (sshd's, as ~/.ssh/environment gives it)
            problem = nccl_iface_problem()
            if problem:
                await clock.pause(1.0)  # NCCL comes up as the executor starts, before rank 0 serves
                for line in problem:
                    emit(line)
                writer.write(b"exit 1\n")
                await writer.drain()
                return
            await reader.read()  # the rank lives until mpirun lets go
        except (ValueError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    hosts = listen_addresses(host)
    server = await asyncio.start_server(one, hosts, port, reuse_address=True)
    for h in hosts:
        emit(f"Server listening on {h} port {port}.", sys.stderr)
    async with server:
        await server.serve_forever()


def sshd_main(argv: list[str] | None = None) -> int:
    port = parse_sshd(sys.argv[1:] if argv is None else argv)
    return runtime.run(lambda: serve_ranks(port))
