"""The unified-memory guard on real nodes (sshd + dockerd, the engine simulator image): a deployment is
loading when real memory on one node runs short (a hog in a container there, the node's /proc/meminfo
this machine's); the guard stops that deployment's containers on every node and leaves it `failed`, naming
the node and the floor, while another deployment's container on the same node keeps running and the node
keeps answering. The floor is set at test time just under what the node has, by less than the hog takes.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .labtools import REPO, cli_env, hog_size_mib, memory_hog, node_available_mib, real_meminfo, sim_site, wait_for
from .labtools import state_cli as cli
from .netlab import Lab

pytestmark = pytest.mark.lab
NAME = "memguard"


@pytest.fixture(scope="module")
def site(lab: Lab, tmp_path_factory):
    work = tmp_path_factory.mktemp("memguard")
    sim_site(lab, work)
    yield lab, work
    for n in lab.nodes:
        lab.sh(n, ["docker", "rm", "-f", "bystander"], check=False)


def containers(lab: Lab, node: str, deployment: str) -> list[str]:
    out = lab.sh(node, ["docker", "ps", "-q", "--filter", f"label=sparktui.deployment={deployment}"])
    return out.stdout.split()


def test_the_hog_takes_real_memory_on_the_node_and_gives_it_back(site):
    lab, _ = site
    node = lab.nodes[1].name
    with real_meminfo(lab, node):
        before = node_available_mib(lab, node)
        mib = hog_size_mib(before)
        with memory_hog(lab, node, mib, hold_s=60) as hog:
            assert lab.sh(node, ["docker", "ps", "-q", "--filter", f"name={hog}"]).stdout.strip()
            held = node_available_mib(lab, node)
            assert before - held >= mib // 2, (before, held, mib)  # other tests share this machine's memory
        back = f"the hog's memory back (MiB available: {before} before, {held} held, hog {mib})"
        wait_for(lambda: node_available_mib(lab, node) > held + mib // 2, 30, back)
    # the stand-in Spark meminfo is back in place
    assert node_available_mib(lab, node) > 100 * 1024


def test_a_node_under_the_floor_stops_the_loading_deployment_and_nothing_else(site):
    """Needs the memory guard (sparktui/core/memory): the floor is read from `memory.floor`."""
    lab, work = site
    worker = lab.nodes[1].name
    state = work / "state"
    with real_meminfo(lab, worker):
        available = node_available_mib(lab, worker)
        hog = hog_size_mib(available)
        floor = available - hog // 2  # crossed only with the hog's memory taken
        data = lab.config_data()
        data["cluster"] = NAME
        # slow shards at real pace: still loading when the hog comes
        data["docker"]["env"] = {"SPARKTUI_SIM_SPEED": "1", "SPARKTUI_SIM_SCENARIO": "slow-load"}
        data["memory"] = {"floor": f"{floor}MiB", "interval": 0.5}
        path = lab.write_config(data, work / "sparktui.yaml")
        tiny = lab.tiny_image([worker])
        lab.sh(
            worker,
            [
                "docker",
                "run",
                "-d",
                "--name",
                "bystander",
                "--label",
                "sparktui.deployment=bystander",
                tiny,
                "sleep",
                "600",
            ],
        )
        env = cli_env() | {"XDG_STATE_HOME": str(state), "PYTHONUNBUFFERED": "1"}
        launch = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sparktui",
                "launch",
                "--engine",
                "vllm",
                "--mode",
                "native",
                "--yes",
                "--wait",
                "--no-preflight",
                "--timeout",
                "300",
                "--json",
                "--config",
                str(path),
            ],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(
                lambda: all(containers(lab, n.name, NAME) for n in lab.nodes),
                120,
                "the deployment's containers on every node",
            )
            with memory_hog(lab, worker, hog, hold_s=120):
                out, err = launch.communicate(timeout=120)
        finally:
            if launch.poll() is None:
                launch.kill()
                launch.communicate()
        doc = json.loads(out) if out.strip().startswith("{") else {}
        assert launch.returncode != 0 and doc.get("state") == "failed", (out[-2000:], err[-2000:])
        problems = [p for p in doc.get("problems", []) if p.get("kind") == "memory_floor"]
        assert problems, doc.get("problems")
        assert problems[0]["node"] == worker and "floor" in problems[0]["message"].lower(), problems

        rc, out, err = cli(path, state, "status", "--json")
        # no container is left, yet status from another process says what stopped it, and why
        [dep] = [d for d in json.loads(out).get("deployments", []) if d.get("name") == NAME]
        assert dep["state"] == "failed" and dep["stopped_by"] == "memory guard", dep
        assert dep["reason"].startswith(f"memory floor on {worker}: ") and "floor" in dep["reason"], dep
        # stopped on every node, the other deployment's container untouched, the node still answers
        for n in lab.nodes:
            assert containers(lab, n.name, NAME) == [], n.name
        assert containers(lab, worker, "bystander")
        assert lab.sh(worker, ["true"], timeout=30).returncode == 0
        rc, out, err = cli(path, state, "check", "--json")
        assert worker in out, (out[-2000:], err[-2000:])
    cli(path, state, "stop", "--yes")
