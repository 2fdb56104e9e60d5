"""The real Ray (the contract tier's pinned release, on CPU) on two lab nodes over the fabric.

`ray start --head` on node1 and a worker joining from node2 by fabric address; the vLLM Ray plan's
join wait is fed the real `ray status` before and after the join. Each node sees the cached
environment through hard links in its own /root (the host's /root and /tmp are hidden in a node),
run by an interpreter of the same Python version that the node can see.
"""

from __future__ import annotations

import io
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.engines.vllm import count_ray_nodes
from sparktui.core.diagnosis.logfile import diagnose_stream

from ..unit.test_plan import plan_for
from .conftest import _build
from .netlab import Lab, LabNode

pytestmark = pytest.mark.lab
RAY_VERSION = "2.60.0"
PORT = 6380
JOIN_S = 120.0  # Ray's own start-up on two shared cores; a join normally takes seconds
RAY = "/root/ray-py/bin/ray"
# CPU only: one declared GPU per node (as a Spark has), a small object store in the node's 2 GiB /dev/shm.
LIGHT = ["--num-cpus", "1", "--num-gpus", "1", "--object-store-memory", str(80 * 1024**2)]
HEAD_ONLY = ["--include-dashboard", "false", "--disable-usage-stats"]


def ray_venv() -> Path:
    try:
        from tests.contract.venvs import MATRIX, python_of
    except ImportError:
        pytest.skip("tests/contract/venvs.py (the contract tier) is not in this tree")
    release = next(r for r in MATRIX if r.key == f"ray-{RAY_VERSION}")
    py = python_of(release)
    if py is None:
        pytest.skip(f"Ray {RAY_VERSION} is not built: python3 -m tests.contract.venvs")
    return py.parent.parent


def _version_of(python: str, lab: Lab, node: LabNode) -> str:
    r = lab.sh(node, [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=False)
    return r.stdout.strip() if r.returncode == 0 else ""


def stage_ray(lab: Lab, node: LabNode, venv: Path) -> None:
    """Ray's site-packages linked into the node's /root, and a `ray` command there to run it."""
    site = next(venv.glob("lib/python3*/site-packages"))
    want = site.parent.name.removeprefix("python")
    dest = node.path / "root" / "ray-site"
    if not dest.exists():
        r = subprocess.run(["cp", "-al", str(site), str(dest)], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:  # another filesystem: copy
            subprocess.run(["rm", "-rf", str(dest)], timeout=120)
            subprocess.run(["cp", "-a", str(site), str(dest)], check=True, timeout=600)
    home = next(
        (ln.split("=", 1)[1].strip() for ln in (venv / "pyvenv.cfg").read_text().splitlines() if ln.startswith("home")),
        "",
    )
    base = next(
        (
            p
            for p in (f"{home}/python{want}", f"/usr/bin/python{want}", f"/usr/local/bin/python{want}")
            if _version_of(p, lab, node) == want
        ),
        None,
    )
    if base is None:
        pytest.skip(f"no Python {want} visible inside a lab node to run the Ray environment with")
    lab.sh(
        node,
        f"{shlex.quote(base)} -m venv --without-pip /root/ray-py\n"
        f"echo /root/ray-site > /root/ray-py/lib/python{want}/site-packages/ray-site.pth\n"
        f"printf '#!/root/ray-py/bin/python\\nimport sys\\nfrom ray.scripts.scripts import main\\n"
        f"sys.exit(main())\\n' > {RAY} && chmod +x {RAY}",
        timeout=120,
    )


def ray(lab: Lab, node: LabNode, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """A `ray` command in the node; daemons it leaves behind write to the node's /tmp, not our pipes."""
    out = "/run/lab/ray-cmd.out"
    r = lab.sh(
        node,
        f"timeout -k 5 {int(timeout)} {shlex.join([RAY, *args])} >{out} 2>&1 </dev/null; rc=$?; cat {out}; exit $rc",
        check=False,
        timeout=timeout + 30,
    )
    return r


@pytest.fixture(scope="module")
def ray_lab():
    """Three nodes without dockerd (node3 runs the failing workers); Ray stopped on each at the end."""
    venv = ray_venv()
    lab = _build(nodes=3, docker=False)
    try:
        for n in lab.nodes:
            stage_ray(lab, n, venv)
        yield lab
    finally:
        for n in lab.nodes:  # always, whatever the tests left running
            ray(lab, n, ["stop", "--force"], timeout=60)
        lab.destroy()


def wait_for_nodes(lab: Lab, head: LabNode, n: int, timeout: float = JOIN_S) -> str:
    """Poll the real `ray status` on the head until the plan's wait step matches (bounded)."""
    wait = plan_for(n, engine="vllm", mode="ray")[0].steps[n]
    assert wait.kind == "wait" and wait.expect_count == n
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        last = ray(lab, head, ["status", "--address", f"{head.fabric_ip}:{PORT}"], timeout=60).stdout
        if wait.matches(last):
            return last
    pytest.fail(f"`ray status` never listed {n} node(s) within {timeout:.0f} s; last:\n{last}")


def test_worker_joins_over_fabric_and_the_join_wait_counts_real_ray_status(ray_lab):
    lab = ray_lab
    head, worker = lab.nodes[0], lab.nodes[1]
    r = ray(
        lab, head, ["start", "--head", "--node-ip-address", head.fabric_ip, "--port", str(PORT), *LIGHT, *HEAD_ONLY]
    )
    assert r.returncode == 0, r.stdout
    assert "Ray runtime started." in r.stdout

    one = wait_for_nodes(lab, head, 1)
    assert count_ray_nodes(one) == 1
    two_step = plan_for(2, engine="vllm", mode="ray")[0].steps[2]
    assert not two_step.matches(one), "the join wait passed with only the head up"

    r = ray(
        lab, worker, ["start", "--address", f"{head.fabric_ip}:{PORT}", "--node-ip-address", worker.fabric_ip, *LIGHT]
    )
    assert r.returncode == 0, r.stdout
    assert "Ray runtime started." in r.stdout
    two = wait_for_nodes(lab, head, 2)
    assert count_ray_nodes(two) == 2
    assert re.search(r"^Active:$", two, re.M), two
    assert re.search(r"\b2\.0 GPU\b", two), two  # each node's declared GPU, as the plan's TP needs


def unused_fabric_ip(lab: Lab, last: int) -> str:
    """An address on the lab's fabric subnet that no node holds (nothing outside the lab is dialled)."""
    ip = lab.fabric_subnet.rsplit(".", 1)[0] + f".{last}"
    assert ip not in {n.fabric_ip for n in lab.nodes} | {n.mgmt_ip for n in lab.nodes}
    return ip


def diagnosis(text: str):
    d = diagnose_stream(io.BytesIO(text.encode()), Diagnoser("vllm"))
    return d.ordered_problems()


def test_a_worker_with_an_address_not_its_own_fails_and_is_named(ray_lab):
    lab = ray_lab
    head, stray = lab.nodes[0], lab.nodes[2]
    try:
        r = ray(
            lab,
            stray,
            ["start", "--address", f"{head.fabric_ip}:{PORT}", "--node-ip-address", unused_fabric_ip(lab, 250), *LIGHT],
            timeout=150,
        )
    finally:
        ray(lab, stray, ["stop", "--force"], timeout=60)
    assert r.returncode not in (0, 124), r.stdout  # Ray gives up by itself (after ~30 s)
    assert "The current node timed out during startup" in r.stdout, r.stdout
    probs = diagnosis(r.stdout)
    assert probs and probs[0].kind == "ray_node_ip", [p.kind for p in probs]


def test_a_worker_pointed_at_an_unreachable_gcs_retries_and_is_named(ray_lab):
    lab = ray_lab
    stray = lab.nodes[2]
    gcs = f"{unused_fabric_ip(lab, 251)}:{PORT}"
    try:
        # Ray retries an absent GCS without end: cut it once the first round has been reported
        r = ray(lab, stray, ["start", "--address", gcs, "--node-ip-address", stray.fabric_ip, *LIGHT], timeout=45)
    finally:
        ray(lab, stray, ["stop", "--force"], timeout=60)
    assert f"Failed to connect to GCS at address {gcs} within 5 seconds." in r.stdout, r.stdout
    assert "Failed to get cluster ID from GCS server: TimedOut" in r.stdout, r.stdout
    probs = diagnosis(r.stdout)
    assert probs and probs[0].kind == "ray_connect", [p.kind for p in probs]
