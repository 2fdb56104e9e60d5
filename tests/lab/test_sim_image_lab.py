"""The simulator image tarball loads into a real dockerd (a lab node's) with the ID its manifest promises."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

BUILDER = Path(__file__).resolve().parents[2] / "tools" / "build_sim_image.py"


def test_docker_loads_the_simulator_image_with_its_manifest_id(lab, tmp_path):
    tar = tmp_path / "engine-sim.tar"
    done = subprocess.run(
        [sys.executable, str(BUILDER), "-o", str(tar), "-t", "sparktui/engine-sim:loadtest"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    node = lab.nodes[0]
    lab.load_image(tar, [node])
    config = json.loads(tarfile.open(tar).extractfile("manifest.json").read())[0]["Config"]
    got = lab.sh(node, ["docker", "image", "inspect", "--format", "{{.Id}}", "sparktui/engine-sim:loadtest"])
    out = got.stdout if isinstance(got.stdout, str) else got.stdout.decode()
    assert out.strip() == "sha256:" + config.removesuffix(".json").split("/")[-1]
    ran = lab.sh(
        node,
        ["docker", "run", "--rm", "sparktui/engine-sim:loadtest", "python3", "-m", "sglang.launch_server", "--help"],
    )
    text = ran.stdout if isinstance(ran.stdout, str) else ran.stdout.decode()
    assert "--dist-init-addr" in text
    lab.sh(node, ["docker", "rmi", "sparktui/engine-sim:loadtest"])


def test_the_simulator_image_runs_trtllm_serve_and_refuses_an_unknown_option_as_click_does(lab, tmp_path):
    tar = tmp_path / "engine-sim.tar"
    done = subprocess.run(
        [sys.executable, str(BUILDER), "-o", str(tar), "-t", "sparktui/engine-sim:trtllm"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    node = lab.nodes[0]
    lab.load_image(tar, [node])
    try:
        bad = lab.sh(
            node,
            ["docker", "run", "--rm", "sparktui/engine-sim:trtllm", "trtllm-serve", "/m", "--served-model-name", "x"],
            check=False,
        )
        text = bad.stderr if isinstance(bad.stderr, str) else bad.stderr.decode()
        assert bad.returncode == 2 and "No such option: --served-model-name" in text
        for tool in ("mpirun", "trtllm-llmapi-launch", "sshd"):
            found = lab.sh(
                node,
                ["docker", "run", "--rm", "sparktui/engine-sim:trtllm", "sh", "-c", f"command -v {tool}"],
                check=False,
            )
            assert found.returncode == 0, tool
    finally:
        lab.sh(node, ["docker", "rmi", "sparktui/engine-sim:trtllm"], check=False)
