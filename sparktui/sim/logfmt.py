"""The engines' log line shapes. Every write is one flushed line, so readers see lines as they happen."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO


def emit(text: str, stream: TextIO | None = None) -> None:
    """Write one or more complete lines and flush."""
    out = stream or sys.stdout
    try:
        out.write(text if text.endswith("\n") else text + "\n")
        out.flush()
    except (BrokenPipeError, ValueError):
        pass  # reader went away; the engine keeps running like a detached container would


def sglang_stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


class SGLangLog:
    """SGLang logs to stderr as `[2025-07-26 16:09:07 TP0] message` (prefix only inside schedulers)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def main(self, msg: str) -> None:
        emit(f"[{sglang_stamp()}] {msg}", self.stream)

    def rank(self, tp_rank: int, msg: str, pp_rank: int | None = None) -> None:
        where = f"PP{pp_rank} TP{tp_rank}" if pp_rank is not None else f"TP{tp_rank}"
        emit(f"[{sglang_stamp()} {where}] {msg}", self.stream)

    def uvicorn(self, level: str, msg: str) -> None:
        emit(f"[{sglang_stamp()}] {(level + ':').ljust(9)} {msg}", self.stream)

    def raw(self, msg: str) -> None:
        emit(msg, self.stream)


class VllmLog:
    """vLLM logs to stdout as `(APIServer pid=12) INFO 10-20 12:00:00 [api_server.py:1839] message`."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.pid = os.getpid()

    @staticmethod
    def _stamp() -> str:
        return time.strftime("%m-%d %H:%M:%S")

    def line(self, who: str | None, level: str, where: str, msg: str) -> None:
        head = f"({who}) " if who else ""
        text = f"{head}{level} {self._stamp()} [{where}] {msg}"
        if "\n" in msg and who:
            # vLLM prefixes every line of a multi-line record with the process tag
            first, *rest = text.split("\n")
            text = "\n".join([first] + [f"({who}) {r}" for r in rest])
        emit(text, self.stream)

    def api(self, level: str, where: str, msg: str) -> None:
        self.line(f"APIServer pid={self.pid}", level, where, msg)

    def core(self, level: str, where: str, msg: str) -> None:
        self.line(f"EngineCore_DP0 pid={self.pid + 1}", level, where, msg)

    def worker(self, tag: str, level: str, where: str, msg: str) -> None:
        self.line(tag, level, where, msg)

    def uvicorn(self, level: str, msg: str) -> None:
        emit(f"(APIServer pid={self.pid}) {(level + ':').ljust(9)} {msg}", self.stream)

    def raw(self, msg: str, who: str | None = None) -> None:
        if who:
            msg = "\n".join(f"({who}) {part}" for part in msg.split("\n"))
        emit(msg, self.stream)


def ray_stamp() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now * 1000) % 1000:03d}"


def ray_line(level: str, where: str, msg: str, stream: TextIO | None = None) -> None:
    """Ray's Python logger: `2025-02-26 11:14:54,614\tINFO worker.py:1636 -- message`."""
    emit(f"{ray_stamp()}\t{level} {where} -- {msg}", stream)


def ray_cpp_line(level: str, where: str, msg: str, stream: TextIO | None = None) -> None:
    """Ray's C++ logger: `[2025-02-16 16:05:55,537 E 350061 350061] rpc_client.h:153: message`."""
    pid = os.getpid()
    emit(f"[{ray_stamp()} {level[0]} {pid} {pid}] {where}: {msg}", stream or sys.stderr)


def progress_bar(desc: str, done: int, total: int, elapsed: float, bar: bool = False) -> str:
    """A tqdm-style line: `desc:  25% Completed | 1/4 [00:01<00:03,  1.02s/it]`."""
    pct = int(100 * done / total) if total else 100
    rate = elapsed / done if done else 0.0
    remaining = rate * (total - done)
    eta = "?" if not done else _mmss(remaining)
    speed = "?it/s" if not done else (f"{rate:5.2f}s/it" if rate >= 1 else f"{1 / rate if rate else 0:5.2f}it/s")
    if bar:
        filled = int(10 * done / total) if total else 10
        return (
            f"{desc}: {pct:3d}%|{'█' * filled}{' ' * (10 - filled)}| {done}/{total} [{_mmss(elapsed)}<{eta}, {speed}]"
        )
    return f"{desc}: {pct:3d}% Completed | {done}/{total} [{_mmss(elapsed)}<{eta}, {speed}]"


def _mmss(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"
