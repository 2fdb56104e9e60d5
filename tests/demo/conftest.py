"""Demo tier: the simulated cluster of `sparktui demo`, started for real (namespaces, SSH servers,
stand-in tools, engine simulator). Rootless; everything it dials is on 127.0.0.0/8.

Skipped where user namespaces are unavailable (the demo itself refuses to start there), except
under CI=true, where that is a failure: CI runs as root and must exercise the demo.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import os
import sys
import time
from pathlib import Path

import pytest

from sparktui.demo.cluster import DemoCluster, DemoOptions
from sparktui.demo.errors import DemoError
from sparktui.demo.namespaces import check_namespaces
from sparktui.demo.runner import ThreadedDemo


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@functools.lru_cache(maxsize=1)
def _namespaces_problem() -> str | None:
    # on a thread of its own: callers may be inside a running event loop
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(asyncio.run, check_namespaces()).result(60)
        except DemoError as e:
            return str(e)
    return None


def require_namespaces() -> None:
    problem = _namespaces_problem()
    if problem:
        if _in_ci():
            pytest.fail(f"the demo cannot run under CI: {problem}")
        pytest.skip(f"the demo cannot run here: {problem}")


def small(base: Path, **kw) -> DemoOptions:
    """Options for tests: a small checkpoint and image, fast engines, a fast link."""
    opts = dict(model_bytes=3 << 20, image_bytes=2 << 20, link_mb_per_s=400.0, speed=60.0, base=str(base))
    opts.update(kw)
    return DemoOptions(**opts)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> DemoCluster:
    """One running demo per test module (2 nodes, pivot scenario), served from its own thread."""
    require_namespaces()
    runner = ThreadedDemo(small(tmp_path_factory.mktemp("demo")))
    cluster = runner.start()
    yield cluster
    runner.stop()


@pytest.fixture
def cli_env(tmp_path) -> dict[str, str]:
    """Environment for `python -m sparktui` subprocesses: the journal goes to this test's directory."""
    return dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))


def sparktui_argv() -> list[str]:
    """How a test starts sparktui: in .ci/run's wheel-install run (SPARKTUI_INSTALLED=1) the console script
    the wheel installed beside this interpreter, as users run it; otherwise this interpreter's module."""
    if os.environ.get("SPARKTUI_INSTALLED"):
        return [str(Path(sys.executable).parent / "sparktui")]
    return [sys.executable, "-m", "sparktui"]


async def sparktui(env: dict[str, str], *args: str, timeout: float = 120) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(
        *sparktui_argv(), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(p.communicate(), timeout)
    except asyncio.TimeoutError:
        p.kill()
        await p.wait()
        raise
    return p.returncode, out.decode(), err.decode()


async def until(check, timeout: float, what: str, interval: float = 0.2):
    """Poll an async check until it returns something truthy, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def load_json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
