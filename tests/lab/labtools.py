"""What the lab tests share: running the CLI against a lab config, waiting for a condition on the
nodes, making and comparing model directories on them, and a site with the engine simulator."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from .netlab import SIM_BUILDER, SIM_IMAGE, Lab

REPO = Path(__file__).resolve().parents[2]
STATE = "/root/.local/state/sparktui/transfers"  # where transfers keep their state on a node
MB = 1 << 20


def cli_env() -> dict[str, str]:
    """The runner's environment without a config of its own, and wide enough for whole lines."""
    return {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"} | {"COLUMNS": "200"}


def cli(cfg: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """`sparktui --config CFG ARGS...`, with no terminal on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "sparktui", "--config", str(cfg), *args],
        cwd=REPO,
        env=cli_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def state_cli(cfg: Path, state: Path, *args: str, timeout: float = 150) -> tuple[int, str, str]:
    """`sparktui ARGS... --config CFG` with its own state directory (deployment records, journal):
    (exit status, stdout, stderr)."""
    env = cli_env() | {"XDG_STATE_HOME": str(state), "PYTHONUNBUFFERED": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", *args, "--config", str(cfg)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return r.returncode, r.stdout, r.stderr


def sim_site(lab: Lab, work: Path, model_bytes: int = 1 << 30) -> None:
    """The engine simulator image on every node (built and loaded where a node lacks it) and the lab's
    model, in two shards, on every node that lacks it."""
    from tests.simhelpers import make_model as make_checkpoint

    if not all(r.returncode == 0 for r in lab.on_each(["docker", "image", "inspect", SIM_IMAGE], check=False).values()):
        tar = work / "sim.tar"
        subprocess.run([sys.executable, str(SIM_BUILDER), "-o", str(tar)], check=True, capture_output=True, timeout=300)
        lab.load_image(tar)
    for n in lab.nodes:
        if not (n.path / "models" / lab.model / "config.json").exists():
            make_checkpoint(n.path / "models" / lab.model, shards=2, total_bytes=model_bytes)


def wait_for(cond, timeout: float, what: str):
    """Poll cond() until it returns a truthy value (returned); fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)  # polling nodes we only reach through commands; bounded by the deadline
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def make_model(lab: Lab, node: str, path: str, sizes_mb: list[int], shards: str = "") -> None:
    """A checkpoint-like directory of random bytes: a config file and shards (in `shards`, a
    subdirectory, when given)."""
    q = shlex.quote(path)
    where = f"{q}/{shards}" if shards else q
    cmds = [f"mkdir -p {where}", f'echo \'{{"model_type": "lab"}}\' > {q}/config.json']
    cmds += [f"head -c {s * MB} /dev/urandom > {where}/model-{i:05d}.safetensors" for i, s in enumerate(sizes_mb)]
    lab.sh(node, " && ".join(cmds), timeout=120)


def sums(lab: Lab, node: str, path: str) -> str:
    """Every file's sha256 under path, sorted by name: equal on two nodes means equal trees."""
    return lab.sh(node, f"cd {shlex.quote(path)} && find . -type f -exec sha256sum {{}} + | sort -k2").stdout


# A memory hog for a container: allocates MiB and touches every page (so it is resident, not just
# reserved), says so, holds it for HOLD seconds and ends; bounded whatever happens to the test.
HOG_PROGRAM = (
    "import sys, time\n"
    "n = int(sys.argv[1]) << 20\n"
    "b = bytearray(n)\n"
    "b[::4096] = b'\\x01' * len(range(0, n, 4096))\n"
    "print('held', n, flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
)
HOG_MAX_MIB = 2048


def meminfo_kb(text: str, field: str = "MemAvailable") -> int:
    return int(re.search(rf"^{field}:\s+(\d+)", text, re.M).group(1))


def node_available_mib(lab: Lab, node: str) -> int:
    """MemAvailable of the node's /proc/meminfo, read on the node (the file the memory guard reads)."""
    return meminfo_kb(lab.sh(node, ["cat", "/proc/meminfo"]).stdout) // 1024


def hog_size_mib(available_mib: int) -> int:
    """What this machine can spare for a hog while tests run beside it: a quarter of what is available,
    at most HOG_MAX_MIB."""
    return max(64, min(HOG_MAX_MIB, available_mib // 4))


@contextlib.contextmanager
def real_meminfo(lab: Lab, node: str) -> Iterator[None]:
    """The node's /proc/meminfo is this machine's while inside (a lab node's is a Spark's stand-in, which
    no allocation moves); the stand-in comes back after."""
    lab.sh(node, "umount /proc/meminfo")
    try:
        yield
    finally:
        lab.sh(node, "mountpoint -q /proc/meminfo || mount --bind /run/lab/meminfo /proc/meminfo")


@contextlib.contextmanager
def memory_hog(
    lab: Lab, node: str, mib: int, hold_s: float = 120.0, name: str = "lab-memory-hog", image: str = SIM_IMAGE
) -> Iterator[str]:
    """A container on node holding mib MiB of real, touched memory (the simulator image's python3) until the
    block ends or hold_s passes (it exits by itself then); yields its name once the memory is held."""
    mib = min(mib, HOG_MAX_MIB)
    lab.sh(node, ["docker", "rm", "-f", name], check=False)
    lab.sh(
        node,
        [
            "docker",
            "run",
            "-d",
            "--rm",
            "--name",
            name,
            "--label",
            "sparktui.lab=memory-hog",
            "--entrypoint",
            "python3",
            image,
            "-c",
            HOG_PROGRAM,
            str(mib),
            str(hold_s),
        ],
    )
    try:
        wait_for(
            lambda: "held" in lab.sh(node, ["docker", "logs", name], check=False).stdout,
            60,
            f"{mib} MiB held on {node}",
        )
        yield name
    finally:
        remove_container(lab, node, name)


def remove_container(lab: Lab, node: str, name: str, timeout: float = 60) -> None:
    """`docker rm -f` until docker no longer lists the container: a daemon under load can answer that
    the kill had no exit event yet, and a hog left running would hold its memory until hold_s."""
    said = ""

    def gone() -> bool:
        nonlocal said
        said = lab.sh(node, ["docker", "rm", "-f", name], check=False, timeout=timeout).stderr.strip()
        listed = lab.sh(node, ["docker", "ps", "-aq", "--filter", f"name=^/{name}$"], check=False)
        return listed.returncode == 0 and not listed.stdout.strip()

    deadline = time.monotonic() + timeout
    while not gone():
        if time.monotonic() > deadline:
            pytest.fail(f"{name} still listed on {node} after {timeout} s of docker rm -f: {said}")
        time.sleep(0.2)  # the daemon's own kill wait; bounded by the deadline


# -- an engine's HTTP endpoint on the lab, and waiting on the CLI's answers
def get(url: str, body: dict | None = None, timeout: float = 10) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the lab's address, never a proxy
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def metric(base: str, name: str) -> float:
    text = get(f"{base}/metrics")[1].decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def until(cond, timeout: float, what: str):
    """Ask cond() again until it returns something truthy (returned); each ask is a CLI run, so this is
    bounded by the deadline and by the runs themselves, no sleeping in between."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last and last[0]:
            return last[1]
    pytest.fail(f"timed out after {timeout} s waiting for {what}; last: {last}")
