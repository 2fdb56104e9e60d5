"""The support check on real nodes (sshd + dockerd, the simulator image): the stock SGLang image of the
seed's story (SGLang 0.5.3.post3) cannot load a Qwen3.5 model, so `plan` refuses before any container
starts, naming the model type, the release and the fix, and `sync model` warns before the copy; the
simulator image playing SGLang 0.5.23 loads it."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import uuid

import pytest

from .labtools import cli
from .netlab import SIM_BUILDER, Lab

pytestmark = pytest.mark.lab
OLD = "sparktui/engine-sim:sglang-0.5.3.post3"
NEW = "sparktui/engine-sim:sglang-0.5.23"  # built here: the lab's shared image may predate the registries
QWEN35 = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "quantization_config": {"quant_method": "fp8"},
}


@pytest.fixture(scope="module")
def old_image(lab: Lab, tmp_path_factory):
    work = tmp_path_factory.mktemp("support")
    for tag, version in ((OLD, "0.5.3.post3"), (NEW, "0.5.23")):
        tar = work / (version + ".tar")
        subprocess.run(
            [sys.executable, str(SIM_BUILDER), "-o", str(tar), "-t", tag, "--sglang-version", version],
            check=True,
            capture_output=True,
            timeout=300,
        )
        lab.load_image(tar)
    yield OLD
    lab.on_each(f"docker rmi {OLD} {NEW} >/dev/null 2>&1; true", check=False)


@pytest.fixture
def config(lab: Lab, old_image):
    path = f"/models/support-{uuid.uuid4().hex[:8]}"
    q = shlex.quote(path)
    lab.sh(
        "node1",
        f"mkdir -p {q} && printf '%s' {shlex.quote(json.dumps(QWEN35))} > {q}/config.json && "
        f"head -c 1048576 /dev/urandom > {q}/model-00001-of-00001.safetensors",
    )
    data = lab.config_data()
    data["model"]["path"] = path
    data["images"] = {"sglang": old_image, "vllm": NEW}  # NEW plays vLLM 0.33.0 too
    yield lab.write_config(data)
    lab.on_each(f"rm -rf {q} $HOME/.cache/sparktui/support", check=False)


def containers(lab: Lab) -> list[str]:
    return [x for n in lab.nodes for x in lab.sh(n, ["docker", "ps", "-aq"]).stdout.split()]


def test_plan_refuses_an_image_that_lacks_the_architecture_before_any_container(lab: Lab, config):
    before = containers(lab)
    r = cli(config, "plan", "--engine", "sglang", "--json", timeout=240)
    plan = json.loads(r.stdout)
    assert r.returncode == 1 and plan["runnable"] is False
    (err,) = [e for e in plan["errors"] if "cannot load" in e]
    assert "qwen3_5_moe" in err and "SGLang 0.5.3.post3" in err and OLD in err
    assert "fix: " in err and "lmsysorg/sglang:latest-cu130" in err
    assert plan["support"]["status"] == "unsupported" and plan["support"]["transformers"] == "4.57.1"
    assert containers(lab) == before  # the probe's container is gone (--rm), and nothing else started
    # asked again: the node's cache answers, no container runs
    again = json.loads(cli(config, "plan", "--engine", "sglang", "--json", timeout=240).stdout)
    assert again["support"]["cached"] is True and again["support"]["status"] == "unsupported"


def test_sync_model_warns_before_copying(lab: Lab, config):
    lab.trust("node1", "node2")
    r = cli(config, "sync", "model", "--wait", "--json", timeout=240)
    assert "cannot load qwen3_5_moe" in r.stderr and "Copying the model is for nothing with sglang" in r.stderr
    assert "vllm" not in r.stderr.split("Copying")[0].split(OLD)[0]  # the vLLM image loads it: no warning
    outcomes = json.loads(r.stdout)
    assert r.returncode == 0 and all(o["ok"] for o in outcomes), outcomes  # a warning, not a refusal


def test_an_image_that_lists_the_architecture_passes(lab: Lab, config):
    r = cli(config, "plan", "--engine", "sglang", "--image", NEW, "--json", timeout=240)
    plan = json.loads(r.stdout)
    assert plan["support"]["status"] == "supported", plan["support"]
    assert plan["support"]["engine_version"] == "0.5.23"
    assert not any("cannot load" in e or "could not check" in e for e in plan["errors"] + plan["warnings"])
    r = cli(config, "check", "--json", timeout=240)
    images = json.loads(r.stdout)["images"]
    assert images["sglang"]["support"]["status"] == "unsupported"
    assert images["vllm"]["support"]["status"] == "supported"


def test_an_image_without_python_cannot_be_asked(lab: Lab, config):
    """Real dockerd on an image of static busybox: no python3 in it, so "could not check", never "supported"."""
    from pathlib import Path

    from . import tinyimage

    tag = f"sparktui/support-nopython-{uuid.uuid4().hex[:6]}:latest"
    tar = Path(lab.dir) / "support-rootfs.tar"
    if not tar.exists():
        tinyimage.build(tar)
    lab.import_image(tar, tag, ["node1"])
    try:
        r = cli(config, "plan", "--engine", "sglang", "--image", tag, "--json", timeout=240)
        s = json.loads(r.stdout)["support"]
        assert s["status"] == "unknown" and f"{tag} has no python3" in s["reason"], s
    finally:
        lab.sh("node1", ["docker", "rmi", tag], check=False)
