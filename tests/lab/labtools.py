"""What the lab tests share: running the CLI against a lab config, waiting for a condition on the
nodes, and making and comparing model directories on them."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .netlab import Lab

REPO = Path(__file__).resolve().parents[2]
STATE = "/root/.local/state/sparktui/transfers"  # where transfers keep their state on a node
MB = 1 << 20


def cli_env() -> dict[str, str]:
    """The runner's environment without a config of its own, and wide enough for whole lines."""
    return {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"} | {"COLUMNS": "200"}


def cli(cfg: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """`sparktui --config CFG ARGS...`, with no terminal on stdin."""
    return subprocess.run([sys.executable, "-m", "sparktui", "--config", str(cfg), *args], cwd=REPO, env=cli_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


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
    cmds = [f"mkdir -p {where}", f"echo '{{\"model_type\": \"lab\"}}' > {q}/config.json"]
    cmds += [f"head -c {s * MB} /dev/urandom > {where}/model-{i:05d}.safetensors" for i, s in enumerate(sizes_mb)]
    lab.sh(node, " && ".join(cmds), timeout=120)


def sums(lab: Lab, node: str, path: str) -> str:
    """Every file's sha256 under path, sorted by name: equal on two nodes means equal trees."""
    return lab.sh(node, f"cd {shlex.quote(path)} && find . -type f -exec sha256sum {{}} + | sort -k2").stdout
