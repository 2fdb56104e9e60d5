"""Running the simulator as local processes and waiting on what they print (tests and the lab).

Waiting is on output lines with bounded timeouts, never on sleeps. Stdlib only, like the rest.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

from sparktui.sim import sim_env

GIB = 1024**3


def make_model(
    folder: str | os.PathLike, shards: int = 4, total_bytes: int = 20 * GIB, config: dict | None = None
) -> Path:
    """A checkpoint directory the simulator accepts: config.json, empty shard files, and an index whose
    metadata.total_size says how big the weights are meant to be."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "num_hidden_layers": 48,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "hidden_size": 4096,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }
    cfg.update(config or {})
    (path / "config.json").write_text(json.dumps(cfg))
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for name in names:
        (path / name).write_bytes(b"")
    (path / "model.safetensors.index.json").write_text(
        json.dumps(
            {"metadata": {"total_size": int(total_bytes)}, "weight_map": {f"w{i}": n for i, n in enumerate(names)}}
        )
    )
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def module_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def launcher_argv(name: str, *args: str) -> list[str]:
    """`vllm ...` / `ray ...` through the shim launchers, with this interpreter."""
    from sparktui.sim import SHIMS_DIR

    return [sys.executable, str(SHIMS_DIR / "bin" / name), *args]


class SimProcess:
    """One simulator process; stdout and stderr merged and kept line by line."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str] | None = None,
        *,
        speed: float | None = 50,
        scenarios: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
        interfaces: str | None = None,
    ) -> None:
        self.argv = argv
        self.env = sim_env(env, speed=speed, scenarios=scenarios, interfaces=interfaces)
        self.env.update(extra_env or {})
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._eof = False
        self.proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> "SimProcess":
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def __enter__(self) -> "SimProcess":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.terminate()

    def snapshot(self) -> list[str]:
        with self._cond:
            return list(self.lines)

    def text(self) -> str:
        return "\n".join(self.snapshot())

    def find(self, pattern: str | re.Pattern[str], start: int = 0) -> int:
        """Index of the first line at or after `start` matching `pattern` (substring or regex), else -1."""
        rx = pattern if isinstance(pattern, re.Pattern) else None
        for i, line in enumerate(self.snapshot()[start:], start):
            if rx.search(line) if rx else pattern in line:  # type: ignore[operator]
                return i
        return -1

    def wait_for(self, pattern: str | re.Pattern[str], timeout: float = 30.0, start: int = 0) -> int:
        """Block until a matching line appears; returns its index. TimeoutError (with the output's tail)
        after `timeout`, or at once if the process ended without printing it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                i = self.find(pattern, start)
                if i >= 0:
                    return i
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    tail = "\n".join(self.lines[-25:])
                    why = "process ended" if self._eof else f"{timeout}s passed"
                    raise TimeoutError(f"{why} without a line matching {pattern!r}; last lines:\n{tail}")
                self._cond.wait(min(left, 1.0))

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout=timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        return rc

    def terminate(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (as docker stop does), then SIGKILL after `timeout`. Returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(5)
        return self.proc.returncode


def group_alive(proc: SimProcess) -> bool:
    """Whether anything of the process group (it and any children it left) still runs."""
    assert proc.proc is not None
    try:
        os.killpg(proc.proc.pid, 0)
        return True
    except ProcessLookupError:
        return False


def http(method: str, url: str, body: dict | None = None, timeout: float = 30.0) -> tuple[int, bytes]:
    """One request; returns (status, body) for any HTTP status."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def sse_events(url: str, body: dict, timeout: float = 30.0) -> Iterator[str]:
    """POST and yield each `data:` payload of a server-sent-event stream."""
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", "accept": "text/event-stream"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for raw in resp:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data: "):
                yield line[len("data: ") :]
