"""Images as users have them, on real nodes (sshd + dockerd): one whose entrypoint is `vllm serve`, as
vllm/vllm-openai's, launches vLLM to ready; on one whose vLLM is 0.11.0 a native plan is refused naming
the release, and the engine itself rejects the native flags when started anyway."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.simhelpers import make_model

from .netlab import SIM_BUILDER, Lab

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
SERVE = "sparktui/engine-sim:vllm-serve"  # ENTRYPOINT ["vllm", "serve"], vLLM 0.33.0
OLD = "sparktui/engine-sim:vllm-0.11.0"  # CMD /bin/sh, vLLM 0.11.0


@pytest.fixture(scope="module")
def images(lab: Lab, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("images")
    for tag, extra in (
        (SERVE, ["--entrypoint", "vllm serve", "--vllm-version", "0.33.0"]),
        (OLD, ["--vllm-version", "0.11.0"]),
    ):
        tar = work / (tag.rsplit(":", 1)[1] + ".tar")
        subprocess.run(
            [sys.executable, str(SIM_BUILDER), "-o", str(tar), "-t", tag, *extra],
            check=True,
            capture_output=True,
            timeout=300,
        )
        lab.load_image(tar)
    for n in lab.nodes:
        make_model(n.path / "models" / lab.model, shards=2, total_bytes=256 * 1024**2)
    data = lab.config_data()
    data["images"] = {"sglang": OLD, "vllm": SERVE}
    data["docker"]["env"] = {"SPARKTUI_SIM_SPEED": "20"}
    path = lab.write_config(data, work / "sparktui.yaml")
    yield path
    cli(path, "stop", "--yes")


def cli(path: Path, *args: str, timeout: float = 150) -> tuple[int, str, str]:
    env = {k: v for k, v in __import__("os").environ.items() if k != "SPARKTUI_CONFIG"}
    env.update(XDG_STATE_HOME=str(path.parent / "state"), COLUMNS="200")
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", *args, "--config", str(path)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return r.returncode, r.stdout, r.stderr


def test_vllm_native_launches_to_ready_from_an_image_whose_entrypoint_is_vllm_serve(lab: Lab, images: Path):
    inspect = lab.sh(lab.head, ["docker", "image", "inspect", "--format", "{{json .Config.Entrypoint}}", SERVE])
    assert json.loads(inspect.stdout) == ["vllm", "serve"]
    rc, out, err = cli(
        images,
        "launch",
        "--engine",
        "vllm",
        "--mode",
        "native",
        "--yes",
        "--wait",
        "--no-preflight",
        "--timeout",
        "120",
        "--json",
    )
    doc = json.loads(out)
    assert rc == 0 and doc["state"] == "ready", (doc.get("detail"), err[-2000:])
    # every container ran the planned command, not `vllm serve <that command>`
    for n in lab.nodes:
        out = lab.sh(n, ["docker", "ps", "--filter", "label=sparktui.deployment", "--format", "{{.ID}}"]).stdout
        for cid in out.split():
            path = lab.sh(n, ["docker", "inspect", "--format", "{{json .Config.Entrypoint}}", cid]).stdout
            assert json.loads(path) != ["vllm", "serve"]
    rc, out, err = cli(images, "plan", "--engine", "vllm", "--mode", "native", "--json")
    plan = json.loads(out)
    assert plan["engine_version"] == "0.33.0" and SERVE in plan["engine_note"], plan


def test_native_vllm_on_an_image_with_vllm_0_11_is_refused_and_the_engine_rejects_it_when_forced(
    lab: Lab, images: Path
):
    rc, out, err = cli(images, "plan", "--engine", "vllm", "--mode", "native", "--image", OLD, "--json")
    plan = json.loads(out)
    assert rc == 1 and plan["engine_version"] == "0.11.0"
    assert any("vLLM 0.11.0" in e and "--mode ray" in e for e in plan["errors"]), plan["errors"]
    rc, out, err = cli(
        images, "launch", "--engine", "vllm", "--mode", "native", "--image", OLD, "--yes", "--no-preflight", "--json"
    )
    assert rc != 0 and "vLLM 0.11.0" in out + err
    # without the plan's gate: the engine of that release says what vLLM 0.11.0 says
    r = lab.sh(
        lab.head,
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "host",
            "--entrypoint",
            "vllm",
            OLD,
            "serve",
            f"/models/{lab.model}",
            "--nnodes",
            "2",
            "--node-rank",
            "0",
        ],
        check=False,
        timeout=120,
    )
    assert r.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --nnodes 2 --node-rank 0" in r.stdout + r.stderr
