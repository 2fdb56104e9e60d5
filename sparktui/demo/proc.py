"""What /proc says about a process: enough to prove a pid is still a given sparktui demo before signalling it."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    try:
        # the command name may hold spaces and parentheses: the fields start after the last ")"
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """When a live process started, in clock ticks since boot; None when gone or a zombie."""
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):
        return None  # a zombie has ended; only its parent has not collected it yet
    try:
        return int(fields[19])
    except (ValueError, IndexError):
        return None


def start_time(pid: int) -> float | None:
    """start_ticks as epoch seconds (btime is whole seconds: good to about a second)."""
    ticks = start_ticks(pid)
    try:
        btime = next(
            int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return None if ticks is None else btime + ticks / os.sysconf("SC_CLK_TCK")


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def real_uid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def is_demo_argv(argv: list[str]) -> bool:
    """`sparktui [options] demo ...`: the console script (run by its python) or `python -m sparktui`."""
    rest = argv[1:]
    if argv and os.path.basename(argv[0]).startswith("python"):
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
            rest = rest[1:]  # the interpreter's own flags (-u, -I, ...)
        if rest[:2] in (["-m", "sparktui"], ["-m", "sparktui.__main__"]):
            return "demo" in rest[2:]
        return bool(rest) and os.path.basename(rest[0]) == "sparktui" and "demo" in rest[1:]
    return bool(argv) and os.path.basename(argv[0]) == "sparktui" and "demo" in rest


def is_demo(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return is_demo_argv([a.decode(errors="replace") for a in raw.split(b"\0") if a])


def terminate(pid: int, ticks: int) -> bool:
    """SIGTERM pid only if it is still the sparktui demo of this euid that started at `ticks`.

    A pidfd pins the process first, so the pid cannot be reused between the checks and the signal.
    False when the process is not that demo (or is gone)."""
    pidfd = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(pid)
    try:
        if start_ticks(pid) != ticks or real_uid(pid) != os.geteuid() or not is_demo(pid):
            return False
        try:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGTERM)
            else:
                os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)
