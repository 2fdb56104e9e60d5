"""docker run, ps, inspect, exec, logs, top, stop, kill, rm, start, restart, wait on a simulated node."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from .. import hardware
from . import images, listing, runtime, times
from .flags import Spec, flag, last, parse
from .store import Container, DockerError, Store, normalize_ref

RUN = Spec(
    "run",
    values={
        "name": ("--name",),
        "env": ("-e", "--env"),
        "env-file": ("--env-file",),
        "label": ("-l", "--label"),
        "label-file": ("--label-file",),
        "volume": ("-v", "--volume"),
        "mount": ("--mount",),
        "network": ("--network", "--net"),
        "ipc": ("--ipc",),
        "pid": ("--pid",),
        "uts": ("--uts",),
        "gpus": ("--gpus",),
        "runtime": ("--runtime",),
        "device": ("--device",),
        "ulimit": ("--ulimit",),
        "cap-add": ("--cap-add",),
        "cap-drop": ("--cap-drop",),
        "shm-size": ("--shm-size",),
        "entrypoint": ("--entrypoint",),
        "workdir": ("-w", "--workdir"),
        "user": ("-u", "--user"),
        "publish": ("-p", "--publish"),
        "restart": ("--restart",),
        "security-opt": ("--security-opt",),
        "hostname": ("-h", "--hostname"),
        "add-host": ("--add-host",),
        "group-add": ("--group-add",),
        "memory": ("-m", "--memory"),
        "memory-swap": ("--memory-swap",),
        "cpus": ("--cpus",),
        "cpuset-cpus": ("--cpuset-cpus",),
        "log-driver": ("--log-driver",),
        "log-opt": ("--log-opt",),
        "platform": ("--platform",),
        "pull": ("--pull",),
        "stop-signal": ("--stop-signal",),
        "stop-timeout": ("--stop-timeout",),
        "tmpfs": ("--tmpfs",),
        "dns": ("--dns",),
        "sysctl": ("--sysctl",),
        "cgroupns": ("--cgroupns",),
        "expose": ("--expose",),
        "attach": ("-a", "--attach"),
        "cidfile": ("--cidfile",),
    },
    bools={
        "detach": ("-d", "--detach"),
        "rm": ("--rm",),
        "interactive": ("-i", "--interactive"),
        "tty": ("-t", "--tty"),
        "privileged": ("--privileged",),
        "init": ("--init",),
        "read-only": ("--read-only",),
        "publish-all": ("-P", "--publish-all"),
        "quiet": ("-q", "--quiet"),
        "sig-proxy": ("--sig-proxy",),
    },
    interspersed=False,
)

KNOWN_NETWORKS = ("host", "bridge", "none", "default")
RUNTIMES = ("runc", "nvidia", "io.containerd.runc.v2")


def _payload() -> int:
    try:
        with open(hardware.demo_root() / "demo.json", encoding="utf-8") as f:
            return int(json.load(f).get("image_bytes") or images.DEFAULT_PAYLOAD)
    except (OSError, ValueError, KeyError):
        return images.DEFAULT_PAYLOAD


def _env_list(opts: dict) -> list[str]:
    out = []
    for path in opts.get("env-file", []):
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as e:
            raise DockerError(f"docker: open {path}: {e.strerror.lower()}.", 125) from None
        out += [ln for ln in (x.strip() for x in lines) if ln and not ln.startswith("#")]
    for kv in opts.get("env", []):
        # `-e NAME` copies NAME from the client's environment, or drops it when unset
        if "=" in kv:
            out.append(kv)
        elif kv in os.environ:
            out.append(f"{kv}={os.environ[kv]}")
    return out


def _mounts(opts: dict) -> tuple[list[str], list[dict]]:
    binds, mounts = [], []
    for spec in opts.get("volume", []):
        parts = spec.split(":")
        if len(parts) < 2:
            mounts.append({"Type": "volume", "Name": spec, "Destination": spec, "RW": True})
            continue
        src, dst, mode = parts[0], parts[1], (parts[2] if len(parts) > 2 else "")
        if not dst.startswith("/"):
            raise DockerError(
                f"docker: Error response from daemon: invalid volume specification: '{spec}': "
                'invalid mount config for type "bind": invalid mount path: '
                f"'{dst}' mount path must be absolute.",
                125,
            )
        if src.startswith("/"):
            # docker creates a missing bind source (-v, not --mount)
            try:
                os.makedirs(src, exist_ok=True)
            except OSError:
                pass
            mounts.append(
                {
                    "Type": "bind",
                    "Source": src,
                    "Destination": dst,
                    "Mode": mode,
                    "RW": "ro" not in mode.split(","),
                    "Propagation": "rprivate",
                }
            )
        else:
            mounts.append({"Type": "volume", "Name": src, "Destination": dst, "RW": "ro" not in mode.split(",")})
        binds.append(spec)
    return binds, mounts


def _labels(opts: dict) -> dict[str, str]:
    out: dict[str, str] = {}
    for kv in opts.get("label", []):
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def _check_host_options(opts: dict) -> tuple[str, list[dict]]:
    network = last(opts, "network", "default") or "default"
    if network not in KNOWN_NETWORKS:
        raise DockerError(f"docker: Error response from daemon: network {network} not found.", 125)
    rt = last(opts, "runtime", "runc") or "runc"
    if rt not in RUNTIMES:
        raise DockerError(f"docker: Error response from daemon: unknown or invalid runtime name: {rt}.", 125)
    requests = []
    if opts.get("gpus"):
        requests.append({"Driver": "", "Count": -1, "Capabilities": [["gpu"]]})
    for dev in opts.get("device", []):
        path = dev.split(":", 1)[0]
        if "=" in path and not path.startswith("/"):
            requests.append({"Driver": "cdi", "DeviceIDs": [path]})  # CDI name, e.g. nvidia.com/gpu=all
        elif not os.path.exists(path):
            raise DockerError(
                f"docker: Error response from daemon: error gathering device information while adding "
                f'custom device "{path}": no such file or directory.',
                125,
            )
    return rt, requests


def cmd_run(store: Store, args: list[str]) -> int:
    opts, rest = parse(RUN, args)
    if not rest:
        raise DockerError("docker: 'docker run' requires at least 1 argument.\nSee 'docker run --help'.", 125)
    ref, cmd = rest[0], rest[1:]
    rt, requests = _check_host_options(opts)
    img = store.find_image(ref)
    if img is None:
        sys.stderr.write(f"Unable to find image '{normalize_ref(ref)}' locally\n")
        try:
            img = images.pull(store, ref, _payload(), out=sys.stderr)
        except DockerError as e:
            raise DockerError(f"docker: {e}.\nSee 'docker run --help'.", 125) from None
    # As docker: --entrypoint replaces the image's Entrypoint and drops its Cmd; without it the
    # image's Entrypoint runs with the command given (or the image's Cmd) as its arguments.
    entry = opts.get("entrypoint")
    if entry:
        entrypoint = [entry[-1]] if entry[-1] else []
        argv = entrypoint + cmd
    else:
        entrypoint = list(img["Config"].get("Entrypoint") or [])
        argv = entrypoint + (cmd or list(img["Config"].get("Cmd") or []))
    if not argv:
        raise DockerError("docker: Error response from daemon: no command specified.", 125)
    binds, mounts = _mounts(opts)
    name = last(opts, "name")
    env = list(img["Config"].get("Env") or []) + _env_list(opts)
    node = hardware.load()
    config = {
        "Name": f"/{name}" if name else None,
        "Path": argv[0],
        "Args": argv[1:],
        "Image": img["Id"],
        "Config": {
            "Hostname": node["hostname"],
            "Env": env,
            "Cmd": cmd or img["Config"].get("Cmd"),
            "Image": ref,
            "Entrypoint": entrypoint or None,
            "Labels": _labels(opts),
            "WorkingDir": last(opts, "workdir", img["Config"].get("WorkingDir", "")),
            "Tty": flag(opts, "tty"),
            "OpenStdin": flag(opts, "interactive"),
            "User": last(opts, "user", ""),
        },
        "HostConfig": {
            "NetworkMode": last(opts, "network", "default"),
            "IpcMode": last(opts, "ipc", "private"),
            "AutoRemove": flag(opts, "rm"),
            "Binds": binds,
            "Runtime": rt,
            "DeviceRequests": requests,
            "Devices": [d for d in opts.get("device", []) if d.startswith("/")],
            "Ulimits": [{"Name": u.split("=")[0], "Value": u.split("=", 1)[-1]} for u in opts.get("ulimit", [])],
            "CapAdd": opts.get("cap-add", []),
            "ShmSize": last(opts, "shm-size"),
            "Privileged": flag(opts, "privileged"),
            "RestartPolicy": {"Name": last(opts, "restart", "no")},
        },
        "Mounts": mounts,
        "NetworkSettings": {"Networks": {last(opts, "network", "bridge") or "bridge": {}}},
        "Driver": "overlay2",
        "Platform": "linux",
    }
    c = store.create(config)
    if flag(opts, "detach"):
        fresh = runtime.start_detached(store, c)
        if fresh.state.get("Error"):
            sys.stderr.write(f"docker: Error response from daemon: {fresh.state['Error']}.\n")
            return 127
        sys.stdout.write(c.id + "\n")
        return 0
    return runtime.supervise(store, c, tee=True, stdin=flag(opts, "interactive"))


def cmd_ps(store: Store, args: list[str]) -> int:
    spec = Spec(
        "ps",
        values={"filter": ("-f", "--filter"), "format": ("--format",), "last": ("-n", "--last")},
        bools={
            "all": ("-a", "--all"),
            "quiet": ("-q", "--quiet"),
            "no-trunc": ("--no-trunc",),
            "size": ("-s", "--size"),
            "latest": ("-l", "--latest"),
        },
    )
    opts, _ = parse(spec, args)
    cs = store.containers(all_=flag(opts, "all") or bool(opts.get("last")) or flag(opts, "latest"))
    cs = [c for c in cs if all(_matches(c, f) for f in opts.get("filter", []))]
    if flag(opts, "latest"):
        cs = cs[:1]
    if opts.get("last"):
        cs = cs[: int(last(opts, "last") or 0)]
    no_trunc = flag(opts, "no-trunc")
    if flag(opts, "quiet"):
        sys.stdout.write("".join((c.id if no_trunc else c.id[:12]) + "\n" for c in cs))
        return 0
    rows = [listing.ps_row(c, no_trunc) for c in cs]
    sys.stdout.write(
        listing.render(rows, last(opts, "format"), ["ID", "Image", "Command", "RunningFor", "Status", "Ports", "Names"])
    )
    return 0


def _matches(c: Container, flt: str) -> bool:
    key, _, value = flt.partition("=")
    labels = c.config["Config"].get("Labels") or {}
    if key == "label":
        k, eq, v = value.partition("=")
        return k in labels and (not eq or labels[k] == v)
    if key == "name":
        return value.lstrip("/") in c.name
    if key == "id":
        return c.id.startswith(value)
    if key == "status":
        return c.state.get("Status") == value
    if key == "ancestor":
        return c.config["Config"]["Image"] == value or c.config["Image"] == value
    if key == "exited":
        return c.state.get("Status") == "exited" and str(c.state.get("ExitCode")) == value
    raise DockerError(f"Error response from daemon: invalid filter '{key}'")


def cmd_inspect(store: Store, args: list[str], kind: str | None = None) -> int:
    spec = Spec("inspect", values={"format": ("-f", "--format"), "type": ("--type",)}, bools={"size": ("-s", "--size")})
    opts, names = parse(spec, args)
    kind = kind or last(opts, "type")
    found, code = [], 0
    for n in names:
        obj = None
        if kind in (None, "container"):
            try:
                obj = store.find(n).inspect()
            except DockerError:
                obj = None
        if obj is None and kind in (None, "image"):
            img = store.find_image(n)
            obj = {k: v for k, v in img.items() if not k.startswith("_") and k != "CreatedNs"} if img else None
        if obj is None:
            what = {"image": "No such image", "container": "No such container"}.get(kind or "", "No such object")
            sys.stderr.write(
                f"Error: {what}: {n}\n" if kind != "container" else f"Error response from daemon: {what}: {n}\n"
            )
            code = 1
            continue
        found.append(obj)
    fmt = last(opts, "format")
    if fmt:
        from . import gotemplate

        try:
            sys.stdout.write("".join(gotemplate.render(fmt, o) + "\n" for o in found))
        except gotemplate.TemplateError as e:
            raise DockerError(f"template: {e}") from None
    else:
        sys.stdout.write(json.dumps(found, indent=4) + "\n")
    return code


def cmd_exec(store: Store, args: list[str]) -> int:
    spec = Spec(
        "exec",
        values={
            "env": ("-e", "--env"),
            "env-file": ("--env-file",),
            "workdir": ("-w", "--workdir"),
            "user": ("-u", "--user"),
            "detach-keys": ("--detach-keys",),
        },
        bools={
            "detach": ("-d", "--detach"),
            "interactive": ("-i", "--interactive"),
            "tty": ("-t", "--tty"),
            "privileged": ("--privileged",),
        },
        interspersed=False,
    )
    opts, rest = parse(spec, args)
    if len(rest) < 2:
        raise DockerError("docker: 'docker exec' requires at least 2 arguments.\nSee 'docker exec --help'.", 1)
    c = store.find(rest[0])
    return runtime.exec_in(
        c, rest[1:], _env_list(opts), flag(opts, "detach"), flag(opts, "interactive"), last(opts, "workdir")
    )


def cmd_logs(store: Store, args: list[str]) -> int:
    spec = Spec(
        "logs",
        values={"since": ("--since",), "until": ("--until",), "tail": ("-n", "--tail")},
        bools={"follow": ("-f", "--follow"), "timestamps": ("-t", "--timestamps"), "details": ("--details",)},
    )
    opts, rest = parse(spec, args)
    if len(rest) != 1:
        raise DockerError("docker: 'docker logs' requires exactly 1 argument.\nSee 'docker logs --help'.", 1)
    c = store.find(rest[0])
    since = until = None
    for key in ("since", "until"):
        raw = last(opts, key)
        if raw:
            value = times.parse_since(raw)
            if value is None:
                raise DockerError(f'invalid value for "{key}": failed to parse value as time or duration: "{raw}"')
            since, until = (value, until) if key == "since" else (since, value)
    tail = last(opts, "tail", "all")
    stamps = flag(opts, "timestamps")
    path = c.log_path
    with path.open("rb") as f:
        lines = f.read().splitlines(keepends=True)
        pos = f.tell()
    if lines and not lines[-1].endswith(b"\n"):  # an entry being written: the follow loop takes it
        pos -= len(lines.pop())
    if tail != "all":
        try:
            n = int(tail)
        except ValueError:
            n = -1
        if n >= 0:
            lines = lines[-n:] if n else []
    out, err = sys.stdout.buffer, sys.stderr.buffer
    held = [out]  # the stream written last

    def emit(raw: bytes) -> None:
        try:
            e = json.loads(raw)
        except ValueError:
            return
        ts = times.parse_stamp(e.get("time", "")) or 0
        if (since is not None and ts < since) or (until is not None and ts > until):
            return
        text = (e["time"] + " " if stamps else "") + e.get("log", "")
        to = err if e.get("stream") == "stderr" else out
        if to is not held[0]:
            # docker writes each entry to its stream as it reads it: where both streams go to one reader
            # (2>&1, an SSH channel merging them) the entries keep the log's order
            held[0].flush()
            held[0] = to
        to.write(text.encode())

    for raw in lines:
        emit(raw)
    out.flush()
    err.flush()
    if not flag(opts, "follow"):
        return 0
    partial = b""
    while True:
        try:
            with path.open("rb") as f:
                f.seek(pos)
                chunk = f.read()
        except FileNotFoundError:
            return 0  # removed while followed
        if chunk:
            pos += len(chunk)
            data = partial + chunk
            *done, partial = data.split(b"\n")
            for raw in done:
                emit(raw)
            out.flush()
            err.flush()
            continue
        fresh = store.reload(c)
        if fresh is None:
            return 0
        if not fresh.running:
            with path.open("rb") as f:  # the supervisor wrote its last entries before the state
                f.seek(pos)
                rest_ = partial + f.read()
            for raw in rest_.split(b"\n"):
                if raw:
                    emit(raw)
            out.flush()
            return 0
        time.sleep(0.1)


def cmd_top(store: Store, args: list[str]) -> int:
    if not args:
        raise DockerError("docker: 'docker top' requires at least 1 argument.", 1)
    c = store.find(args[0])
    if not c.running:
        raise DockerError(f"Error response from daemon: container {c.id} is not running")
    procs = runtime.processes(c)
    ps_opts = args[1:]
    if ps_opts[:1] == ["-o"] and len(ps_opts) > 1:
        cols = ps_opts[1].split(",")
        names = {"pid": "PID", "args": "COMMAND", "cmd": "CMD", "comm": "COMMAND", "user": "USER", "time": "TIME"}
        if any(col not in names for col in cols):
            raise DockerError(
                f"Error response from daemon: ps: error: unknown user-defined format specifier "
                f'"{next(x for x in cols if x not in names)}"'
            )

        def cell(col: str, p: tuple[int, str, float]) -> str:
            return {
                "pid": str(p[0]),
                "args": p[1],
                "cmd": p[1],
                "comm": p[1].split(" ")[0].rsplit("/", 1)[-1],
                "user": "root",
                "time": f"{int(p[2]) // 60}:{int(p[2]) % 60:02d}",
            }[col]

        rows = [[names[col] for col in cols]] + [[cell(col, p) for col in cols] for p in procs]
    else:
        rows = [["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"]]
        rows += [
            ["root", str(p[0]), "0", "0", "00:00", "?", f"00:{int(p[2]) // 60:02d}:{int(p[2]) % 60:02d}", p[1]]
            for p in procs
        ]
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    sys.stdout.write(
        "".join(
            "".join(v.ljust(max(width[i] + 4, 20)) if i < len(r) - 1 else v for i, v in enumerate(r)) + "\n"
            for r in rows
        )
    )
    return 0


def _each(store: Store, names: list[str], what: str, fn) -> int:
    if not names:
        raise DockerError(f"docker: 'docker {what}' requires at least 1 argument.\nSee 'docker {what} --help'.", 1)
    code = 0
    for n in names:
        try:
            fn(store.find(n))
            sys.stdout.write(n + "\n")
        except DockerError as e:
            sys.stderr.write(f"{e}\n")
            code = 1
    return code


def cmd_stop(store: Store, args: list[str]) -> int:
    spec = Spec("stop", values={"time": ("-t", "--time", "--timeout"), "signal": ("-s", "--signal")})
    opts, names = parse(spec, args)
    grace = float(last(opts, "time", "10") or 10)
    sig = _signal(last(opts, "signal", "TERM") or "TERM")
    return _each(store, names, "stop", lambda c: runtime.stop(store, c, grace, sig))


def _signal(name: str) -> int:
    n = name.upper().removeprefix("SIG")
    if n.isdigit():
        return int(n)
    try:
        return int(getattr(signal, "SIG" + n))
    except AttributeError:
        raise DockerError(f"Error response from daemon: Invalid signal: {name}") from None


def cmd_kill(store: Store, args: list[str]) -> int:
    opts, names = parse(Spec("kill", values={"signal": ("-s", "--signal")}), args)
    sig = _signal(last(opts, "signal", "KILL") or "KILL")

    def kill(c: Container) -> None:
        if not c.running:
            raise DockerError(
                f"Error response from daemon: cannot kill container: {c.name}: container {c.id} is not running"
            )
        runtime.signal_container(c, sig)
        if sig == signal.SIGKILL:
            runtime.wait_stopped(store, c, 10.0)

    return _each(store, names, "kill", kill)


def cmd_pause(store: Store, args: list[str]) -> int:
    """Freeze every process of the container (dockerd uses the cgroup freezer; SIGSTOP to the tree here)."""

    def pause(c: Container) -> None:
        if not c.running:
            raise DockerError(f"Error response from daemon: container {c.id} is not running")
        if c.state.get("Paused"):
            raise DockerError(f"Error response from daemon: container {c.id} is already paused")
        runtime.freeze(c, True)
        store.set_state(c, Paused=True)

    return _each(store, parse(Spec("pause"), args)[1], "pause", pause)


def cmd_unpause(store: Store, args: list[str]) -> int:
    def unpause(c: Container) -> None:
        if not c.state.get("Paused"):
            raise DockerError(f"Error response from daemon: container {c.id} is not paused")
        runtime.freeze(c, False)
        store.set_state(c, Paused=False)

    return _each(store, parse(Spec("unpause"), args)[1], "unpause", unpause)


def cmd_rm(store: Store, args: list[str]) -> int:
    opts, names = parse(
        Spec("rm", bools={"force": ("-f", "--force"), "volumes": ("-v", "--volumes"), "link": ("-l", "--link")}), args
    )

    def rm(c: Container) -> None:
        if c.running:
            if not flag(opts, "force"):
                raise DockerError(
                    f'Error response from daemon: cannot remove container "/{c.name}": container is '
                    "running: stop the container before removing or force remove"
                )
            runtime.signal_container(c, signal.SIGKILL)
            runtime.wait_stopped(store, c, 10.0)
        store.remove(c)

    return _each(store, names, "rm", rm)


def cmd_start(store: Store, args: list[str]) -> int:
    opts, names = parse(
        Spec("start", bools={"attach": ("-a", "--attach"), "interactive": ("-i", "--interactive")}), args
    )

    def start(c: Container) -> None:
        if not c.running:
            runtime.start_detached(store, c)

    return _each(store, names, "start", start)


def cmd_restart(store: Store, args: list[str]) -> int:
    opts, names = parse(Spec("restart", values={"time": ("-t", "--time", "--timeout")}), args)
    grace = float(last(opts, "time", "10") or 10)

    def restart(c: Container) -> None:
        runtime.stop(store, c, grace)
        fresh = store.reload(c)
        if fresh is not None:
            runtime.start_detached(store, fresh)

    return _each(store, names, "restart", restart)


def cmd_wait(store: Store, args: list[str]) -> int:
    code = 0
    for n in args:
        try:
            c = store.find(n)
        except DockerError as e:
            sys.stderr.write(f"{e}\n")
            code = 1
            continue
        while True:
            fresh = store.reload(c)
            if fresh is None or not fresh.running:
                break
            time.sleep(0.1)
        sys.stdout.write(f"{(fresh or c).state.get('ExitCode', 0)}\n")
        sys.stdout.flush()
    return code
