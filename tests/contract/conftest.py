"""Contract tier: sparktui's plans against the real engines' parsers and environment lists.

The environments are built by `python3 -m tests.contract.venvs` (.ci/run does it first, within a time
budget). A missing environment skips its tests with the command that builds it; every built one must pass.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import time

import pytest

from .venvs import MATRIX, PROBE, Release, python_of

_cache: dict[tuple, dict] = {}
ANSWER = "PROBE-ANSWER "  # probe.py's answer line in --serve mode


class ProbeServer:
    """probe.py --serve in one release's environment: the release imported once, a parser built per question."""

    def __init__(self, py, engine: str) -> None:
        self.err = tempfile.TemporaryFile()  # a file, not a pipe nobody reads: warnings cannot stall it
        self.proc = subprocess.Popen(
            [str(py), str(PROBE), engine, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err
        )
        self.buf = b""

    def end(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()  # the loop ends with its stdin

    def ask(self, request: dict, timeout: float) -> dict | str:
        """The answer, or the reason there is none (the process ended or `timeout` passed: its stderr's tail)."""
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            line, nl, rest = self.buf.partition(b"\n")
            if nl:
                self.buf = rest
                if line.startswith(ANSWER.encode()):
                    return json.loads(line[len(ANSWER) :])
                continue  # a line the import printed
            left = deadline - time.monotonic()
            ready = left > 0 and select.select([self.proc.stdout], [], [], left)[0]
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16) if ready else b""
            if not chunk:
                self.close()
                self.err.seek(0)
                why = "no answer in time" if left <= 0 or not ready else f"exited {self.proc.returncode}"
                return f"{why}:\n{self.err.read().decode(errors='replace')[-3000:]}"
            self.buf += chunk

    def close(self) -> None:
        self.end()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


_servers: dict[str, ProbeServer] = {}


@pytest.fixture(scope="module", autouse=True)
def _probe_servers():
    """The servers a module started end with it: idle imports of every release hold gigabytes."""
    yield
    for server in _servers.values():  # all told first: each exits in seconds, side by side
        server.end()
    while _servers:
        _servers.popitem()[1].close()


def probe(r: Release, argvs: list[list[str]], env: list[str] = ()) -> dict:
    """The release's verdict on each argv, and which env names it reads (cached per question)."""
    key = (r.key, json.dumps(argvs), tuple(env))
    if key not in _cache:
        py = python_of(r)
        if py is None:
            pytest.skip(f"contract environment {r.key} is not built: python3 -m tests.contract.venvs")
        if r.key not in _servers:
            _servers[r.key] = ProbeServer(py, r.engine)
        got = _servers[r.key].ask({"argvs": argvs, "env": list(env)}, timeout=600)
        if isinstance(got, str):
            del _servers[r.key]
        assert not isinstance(got, str), f"{r.key} probe failed: {got}"
        _cache[key] = got
    return _cache[key]


def releases(engine: str) -> list[Release]:
    return [r for r in MATRIX if r.engine == engine]


def pytest_generate_tests(metafunc):
    for engine in ("vllm", "sglang", "ray"):
        name = f"{engine}_release"
        if name in metafunc.fixturenames:
            rs = releases(engine)
            metafunc.parametrize(name, rs, ids=[r.version for r in rs])
