"""Containers as processes on the node: each in its own PID and mount namespace, logs in json-file form.

The container's command runs under `unshare --pid --fork --mount-proc`, so it is PID 1 of its own
PID namespace as in docker: `docker exec ... >/proc/1/fd/1` reaches its log, and when it exits every
process exec'd into the container ends with it. A supervisor (this module run as a program, detached
from the SSH session like containerd's shim) pumps stdout/stderr into log.json with RFC3339Nano
times, and writes the exit status down. `--network host` is the only network there is: all nodes
share this machine's loopback, each with its own addresses.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ... import sim
from ...sim import hostmem
from .. import hardware
from . import rootfs, times
from .store import MEMORY_LEDGER, Container, DockerError, Store, proc_start_ticks

UNSHARE = ["unshare", "--pid", "--fork", "--mount", "--mount-proc", "--propagation", "private", "--"]
CONTAINER_SITE = Path(__file__).resolve().parents[1] / "container_site"
START_WAIT_S = 15.0  # how long `docker run -d` waits for the container's process to be up


def _own_dirs(c: Container) -> list[str]:
    """rootfs.py's arguments: each private directory and the container's directory that stands for it."""
    return [x for target in rootfs.PRIVATE_DIRS for x in (target, str(c.dir / target.strip("/")))]


def _wait_own_dirs(pid: int, proc: subprocess.Popen) -> None:
    """Until PID 1 has made its own directories and exec'd the command (or ended): docker reports a
    container running with its filesystem in place, and a `docker exec` right after (the TensorRT-LLM
    head's hostfile) must not write the machine's /etc."""
    deadline = time.monotonic() + START_WAIT_S
    while pid and proc.poll() is None and time.monotonic() < deadline:
        try:
            if b"sparktui.demo.docker.rootfs" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                return
        except OSError:
            return
        time.sleep(0.005)


def _demo_settings() -> dict:
    try:
        with open(hardware.demo_root() / "demo.json", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, KeyError):
        return {}


def process_env(c: Container, extra: list[str] | None = None) -> dict[str, str]:
    """What the container's processes see: the image's and the user's -e values, plus the plumbing
    that makes the engine simulator stand in for the engines on this node (it is not in inspect)."""
    node = hardware.load()
    settings = _demo_settings()
    env = {
        "HOME": str(c.dir / "root"),
        "TMPDIR": str(c.dir / "tmp"),  # a private /tmp: Ray keeps its session files there
        "HOSTNAME": node["hostname"],
        "LANG": "C.UTF-8",
        "SPARKTUI_SIM_INTERFACES": hardware.sim_interfaces(node["index"], node.get("interfaces")),
        "SPARKTUI_SIM_DEFAULT_ROUTE": hardware.DEFAULT_ROUTE,
        hardware.NODE_ENV: str(hardware.node_dir()),
        hardware.ROOT_ENV: str(hardware.demo_root()),
    }
    if settings.get("speed"):
        env["SPARKTUI_SIM_SPEED"] = str(settings["speed"])
    meminfo = hardware.node_dir() / "meminfo"
    if hostmem.usable(meminfo):  # the engines take and give back the node's memory there (sim/hostmem.py)
        env[hostmem.MEMINFO_ENV] = str(meminfo)
        env[hostmem.LEDGER_ENV] = str(c.dir / MEMORY_LEDGER)
    for kv in list(c.config["Config"].get("Env") or []) + list(extra or []):
        k, _, v = kv.partition("=")
        env[k] = v
    container_bin = hardware.demo_root() / "container-bin"
    env["PATH"] = os.pathsep.join(
        [
            str(sim.SHIMS_DIR / "bin"),
            str(container_bin),
            env.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ]
    )
    # container_site: Python in the container sees the node's NICs (its sitecustomize.py says how)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(CONTAINER_SITE), str(sim.SHIMS_DIR), str(sim.PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p
    )
    return env


def _which(cmd: str, env: dict[str, str]) -> str | None:
    if "/" in cmd:
        return cmd if os.access(cmd, os.X_OK) else None
    return shutil.which(cmd, path=env.get("PATH"))


def _not_found(cmd: str) -> str:
    return (
        f"failed to create task for container: failed to create shim task: OCI runtime create failed: runc "
        f'create failed: unable to start container process: exec: "{cmd}": executable file not found in '
        f"$PATH: unknown"
    )


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        pass
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
    return out


class _LogWriter:
    """json-file entries, one per line of output; a last line without newline is kept as it is."""

    def __init__(self, path: Path, tee: bool):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.tee = tee
        self.partial = {"stdout": b"", "stderr": b""}
        self.last_ns = 0

    def feed(self, stream: str, data: bytes) -> None:
        if self.tee:
            out = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
            with contextlib.suppress(OSError, ValueError):
                out.write(data)
                out.flush()
        buf = self.partial[stream] + data
        *lines, rest = buf.split(b"\n")
        self.partial[stream] = rest
        if lines:
            self._write([(stream, line + b"\n", self._stamp()) for line in lines])

    def _stamp(self) -> str:
        # one time per line, strictly increasing, as docker's per-message receive times are:
        # a reader resuming with --since LAST can tell the lines at the boundary apart
        self.last_ns = max(times.now_ns(), self.last_ns + 1)
        return times.rfc3339(self.last_ns)

    def close(self) -> None:
        self._write([(s, b, self._stamp()) for s, b in self.partial.items() if b])
        os.close(self.fd)

    def _write(self, entries: list[tuple[str, bytes, str]]) -> None:
        if not entries:
            return
        text = "".join(
            json.dumps({"log": b.decode("utf-8", "replace"), "stream": s, "time": t}) + "\n" for s, b, t in entries
        )
        with contextlib.suppress(OSError):
            os.write(self.fd, text.encode())


def supervise(store: Store, c: Container, tee: bool = False, stdin: bool = False) -> int:
    """Run the container's process to its end: state, log, exit status, --rm. Returns the exit code.

    tee: an attached `docker run` (output also to this process's stdout/stderr); stdin: `-i`, the
    container reads this process's stdin."""
    argv = [c.config["Path"], *c.config["Args"]]
    env = process_env(c)
    if _which(argv[0], env) is None:
        store.set_state(c, Status="created", ExitCode=127, Error=_not_found(argv[0]))
        if tee:
            sys.stderr.write(f"docker: Error response from daemon: {_not_found(argv[0])}.\n")
        return 127
    unshare = shutil.which("unshare") or "unshare"
    # the container's own /etc, /root and /run (rootfs.py), then its command, exec'd: still PID 1
    setup = [sys.executable, "-S", "-m", "sparktui.demo.docker.rootfs", *_own_dirs(c), "--"]
    proc = subprocess.Popen(
        [unshare, *UNSHARE[1:], *setup, *argv],
        stdin=None if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd="/",
    )
    pid1 = 0
    for _ in range(200):  # the container's PID 1 is unshare's child, up within milliseconds
        kids = _children(proc.pid)
        if kids or proc.poll() is not None:
            pid1 = kids[0] if kids else 0
            break
        time.sleep(0.01)
    _wait_own_dirs(pid1, proc)
    store.set_state(
        c,
        Status="running",
        Running=True,
        Pid=pid1,
        ExitCode=0,
        Error="",
        StartedAt=times.rfc3339(times.now_ns()),
        FinishedAt=times.ZERO,
        _ticks=proc_start_ticks(pid1) if pid1 else None,
        _supervisor=os.getpid(),
    )
    if tee:  # an attached `docker run` passes Ctrl-C and TERM on to the container, as docker's sig-proxy does
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda s, _f: pid1 and _kill(pid1, s))
    log = _LogWriter(c.log_path, tee)
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    while sel.get_map():
        for key, _ in sel.select():
            data = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
            if data:
                log.feed(key.data, data)
            else:
                sel.unregister(key.fileobj)
    log.close()
    rc = proc.wait()
    code = rc if rc >= 0 else 128 - rc
    hostmem.release_ledger(c.dir / MEMORY_LEDGER)  # a killed engine's memory comes back with its exit
    store.set_state(
        c, Status="exited", Running=False, Pid=0, ExitCode=code, FinishedAt=times.rfc3339(times.now_ns()), _ticks=None
    )
    if c.config["HostConfig"].get("AutoRemove"):
        store.remove(c)
    return code


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def start_detached(store: Store, c: Container) -> Container:
    """Start the supervisor away from this command (it outlives the SSH session) and wait for the
    container's process to be up (or to have failed)."""
    with open(c.dir / "supervisor.log", "ab") as err:
        subprocess.Popen(
            [sys.executable, "-S", "-m", "sparktui.demo.docker.runtime", str(store.root), c.id],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env=dict(os.environ),
            cwd="/",
        )
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        fresh = store.reload(c)
        if fresh is None:  # --rm and already over
            return c
        if fresh.state.get("Status") != "created" or fresh.state.get("Error"):
            return fresh
        time.sleep(0.02)
    raise DockerError(f"Error response from daemon: container {c.id} did not start within {START_WAIT_S:g} s")


def signal_container(c: Container, sig: int) -> None:
    pid = c.state.get("Pid") or 0
    if pid and c.running:
        if c.state.get("Paused"):
            freeze(c, False)  # a stopped process would never see the signal
        _kill(pid, sig)


def freeze(c: Container, on: bool) -> None:
    """SIGSTOP (SIGCONT) the container's process and all its descendants: what `docker pause` does to it."""
    pid = c.state.get("Pid") or 0
    todo, seen = [pid] if pid else [], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        _kill(p, signal.SIGSTOP if on else signal.SIGCONT)
        todo.extend(_children(p))


def wait_stopped(store: Store, c: Container, timeout: float) -> Container | None:
    """Poll until the container is no longer running; returns its fresh record (None once removed)."""
    deadline = time.monotonic() + timeout
    fresh: Container | None = c
    while time.monotonic() < deadline:
        fresh = store.reload(c)
        if fresh is None or not fresh.running:
            return fresh
        time.sleep(0.05)
    return fresh


def stop(store: Store, c: Container, grace: float, sig: int = signal.SIGTERM) -> None:
    """docker stop: the stop signal, `grace` seconds, then SIGKILL."""
    if not c.running:
        return
    signal_container(c, sig)
    fresh = wait_stopped(store, c, grace)
    if fresh is not None and fresh.running:
        signal_container(fresh, signal.SIGKILL)
        wait_stopped(store, fresh, 10.0)


def exec_argv(c: Container, argv: list[str], workdir: str | None) -> list[str]:
    """nsenter into the container's PID and mount namespaces (this node's root owns them)."""
    nsenter = shutil.which("nsenter") or "nsenter"
    return [nsenter, "-t", str(c.state["Pid"]), "-p", "-m", f"--wd={workdir or '/'}", "--", *argv]


def exec_in(
    c: Container, argv: list[str], env_extra: list[str], detach: bool, interactive: bool, workdir: str | None
) -> int:
    if not c.running or not c.state.get("Pid"):
        raise DockerError(f"Error response from daemon: container {c.id} is not running")
    env = process_env(c, env_extra)
    if _which(argv[0], env) is None:
        raise DockerError(
            f"OCI runtime exec failed: exec failed: unable to start container process: exec: "
            f'"{argv[0]}": executable file not found in $PATH: unknown',
            127,
        )
    full = exec_argv(c, argv, workdir)
    if detach:
        subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        return 0
    proc = subprocess.Popen(full, stdin=None if interactive else subprocess.DEVNULL, env=env)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait()
    return rc if rc >= 0 else 128 - rc


def processes(c: Container) -> list[tuple[int, str, float]]:
    """(pid, command line, cpu seconds) of every process in the container's PID namespace."""
    pid = c.state.get("Pid") or 0
    try:
        ns = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return []
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.readlink(d / "ns" / "pid") != ns:
                continue
            args = (d / "cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            out.append((int(d.name), args, (int(fields[11]) + int(fields[12])) / tick))
        except (OSError, ValueError, IndexError):
            continue
    return sorted(out)


def main(argv: list[str]) -> int:
    """Supervisor entry: runtime.py STORE_ROOT CONTAINER_ID."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    store = Store(Path(argv[0]))
    c = store.find(argv[1])
    return supervise(store, c)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
