"""The support check: the script the head runs (with a stand-in `docker` whose `run` runs the probe under
this Python with the simulator's engine packages), its cache, its bad inputs, the verdicts, and the plan."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.plan.support import Support, check_support, classify, parse_support

from .test_plan import SGLANG_IMAGE, cluster

REPO = Path(__file__).resolve().parents[2]
SHIMS = REPO / "sparktui" / "sim" / "shims"
QWEN35 = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "quantization_config": {"quant_method": "fp8"},
}
QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe"}

# docker: `image inspect` answers an ID while $FAKE/present exists; `run` records itself, checks the model
# is mounted read-only at its own path, and runs what follows the image under $FAKE_PY.
DOCKER = r"""#!/bin/bash
if [ "$1 $2" = "image inspect" ]; then
  [ -f "$FAKE/present" ] && { echo sha256:0123abcd; exit 0; }
  echo "Error response from daemon: No such image: ${@: -1}" >&2; exit 1
fi
[ "$1" = run ] || exit 2
echo run >> "$FAKE/runs"
shift
while [ "$1" != "--entrypoint" ]; do
  [ "$1" = "-v" ] && printf '%s\n' "$2" >> "$FAKE/mounts"
  shift
done
shift 3
exec "$FAKE_PY" "$@"
"""


class LocalNode:
    """A node whose shell is this machine's bash, with the stand-in docker first on PATH."""

    def __init__(self, fake: Path, env: dict[str, str], name: str = "spark1"):
        self.name, self.fake, self.env = name, fake, env

    async def run(self, cmd, timeout=None):
        p = await asyncio.create_subprocess_exec(
            "bash", "-c", cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = await asyncio.wait_for(p.communicate(), timeout)
        return SimpleNamespace(stdout=out.decode(), stderr=err.decode(), exit_status=p.returncode, ok=p.returncode == 0)


@pytest.fixture
def node(tmp_path):
    fake = tmp_path / "fake"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "docker").write_text(DOCKER)
    (fake / "bin" / "docker").chmod(0o755)
    (fake / "present").write_text("")
    env = {
        "PATH": f"{fake / 'bin'}:{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "FAKE": str(fake),
        "FAKE_PY": sys.executable,
        "PYTHONPATH": f"{SHIMS}:{REPO}",
    }
    return LocalNode(fake, env)


def model(tmp_path, cfg, name="my 'model' dir") -> str:
    d = tmp_path / name
    d.mkdir()
    if cfg is not None:
        (d / "config.json").write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return str(d)


def ask(node, engine, path, image=SGLANG_IMAGE) -> Support:
    return asyncio.run(check_support(node, engine, image, path, timeout=60))


def runs(node) -> int:
    f = node.fake / "runs"
    return len(f.read_text().splitlines()) if f.exists() else 0


def test_the_image_answers_once_per_image_and_config(node, tmp_path):
    node.env["SPARKTUI_SIM_SGLANG_VERSION"] = "0.5.3.post3"  # the stock image of the seed's story
    path = model(tmp_path, QWEN35)
    s = ask(node, "sglang", path)
    assert s.status == "unsupported" and s.refuses and not s.cached
    assert "Qwen3_5MoeForConditionalGeneration" in s.reason and "SGLang 0.5.3.post3" in s.reason
    assert "transformers 4.57.1" in s.reason and "qwen3_5_moe" in s.reason
    assert "lmsysorg/sglang:latest-cu130" in s.fix
    assert "qwen3_5_moe" in s.line() and SGLANG_IMAGE in s.line()
    # the directory went in read-only at its own path, one word although it holds a space and a quote
    assert (node.fake / "mounts").read_text().splitlines() == [f"{path}:{path}:ro"]
    again = ask(node, "sglang", path)
    assert again.cached and again.status == "unsupported" and runs(node) == 1
    # another config is another question
    Path(path, "config.json").write_text(json.dumps(QWEN3_MOE))
    s = ask(node, "sglang", path)
    assert s.status == "supported" and not s.cached and runs(node) == 2
    assert s.engine_version == "0.5.3.post3" and s.model_type == "qwen3_moe"


def test_vllm_release_that_lists_the_architecture(node, tmp_path):
    node.env["SPARKTUI_SIM_VLLM_VERSION"] = "0.31.0"
    s = ask(node, "vllm", model(tmp_path, QWEN35), image="nvcr.io/nvidia/vllm:26.10-py3")
    assert s.status == "supported", s.line()
    assert s.quant_method == "fp8" and s.transformers == "5.17.0"


@pytest.mark.parametrize(
    "cfg, words",
    [
        (None, "has no config.json"),
        ("{not json", "config.json does not parse"),
        ("[1, 2]", "holds no JSON object"),
        (json.dumps({"model_type": "qwen3_moe"}), "names no architectures"),
    ],
)
def test_bad_model_config_cannot_check(node, tmp_path, cfg, words):
    s = ask(node, "sglang", model(tmp_path, cfg))
    assert s.status == "unknown" and words in s.reason and not s.refuses
    assert s.line().startswith("could not check")


def test_missing_image_or_python_or_directory_cannot_check(node, tmp_path):
    path = model(tmp_path, QWEN3_MOE)
    node.env["FAKE_PY"] = "/nonexistent/python3"
    s = ask(node, "sglang", path)
    assert s.status == "unknown" and "has no python3" in s.reason
    assert not list((tmp_path / "home").rglob("*.json"))  # a failure is not cached
    (node.fake / "present").unlink()
    s = ask(node, "sglang", path)
    assert s.status == "unknown" and f"image {SGLANG_IMAGE} is not on spark1" in s.reason
    s = ask(node, "sglang", str(tmp_path / "nowhere"))
    assert s.status == "unknown" and s.no_model and runs(node) == 1


def test_damaged_cache_says_so(node, tmp_path):
    path = model(tmp_path, QWEN3_MOE)
    assert ask(node, "sglang", path).status == "supported"
    (cached,) = (tmp_path / "home").rglob("*.json")
    cached.write_text("@@sparktui-support-json {broken\n")
    s = ask(node, "sglang", path)
    assert s.status == "unknown" and "remove it" in s.reason


def test_unreadable_output_is_not_supported():
    for out in ("", "garbage", "@@sparktui-support key sha256:1 ab\n@@sparktui-support failed 1\nTraceback"):
        s = parse_support("vllm", "img", "/m", "spark1", out)
        assert s.status == "unknown" and s.reason


def _raw(**kw):
    base = {
        "model_type": "qwen3_5_moe",
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "engine_version": "0.5.23",
        "transformers": "4.57.1",
        "autoconfig_error": None,
        "archs_known": {"Qwen3_5MoeForConditionalGeneration": True},
        "quant_method": None,
    }
    return {**base, **kw}


def _verdict(**kw) -> Support:
    return classify(Support(engine="sglang", image="img:tag", model_path="/m", node="spark1"), _raw(**kw))


def test_verdicts():
    assert _verdict().status == "supported"
    # the engine has the class, but the image's transformers cannot read the config: the seed's upgrade
    s = _verdict(autoconfig_error="ValueError: unknown model type", config_type_known=False)
    assert s.status == "unsupported" and "transformers 4.57.1" in s.reason and "pip install -U transformers" in s.fix
    # ... unless the engine carries its own config class for that model type
    assert _verdict(autoconfig_error="ValueError: x", config_type_known=True).status == "supported"
    # neither could be asked: not "supported"
    assert _verdict(autoconfig_error="ValueError: x", config_type_error="ImportError").status == "unknown"
    # not in the registry, but transformers reads it: the Transformers backend, a warning
    s = _verdict(archs_known={"Qwen3_5MoeForConditionalGeneration": False})
    assert s.status == "fallback" and not s.refuses and "Transformers backend" in s.line()
    s = _verdict(quant_method="exotic", quant_known=False)
    assert s.status == "unsupported" and "'exotic'" in s.reason
    assert _verdict(quant_method="fp8", quant_error="ImportError: x").status == "unknown"
    assert _verdict(registry_error="ImportError: no vllm", archs_known=None).status == "unknown"
    assert _verdict(engine_version=None).status == "unknown"


def test_plan_refuses_an_image_that_cannot_load_the_model():
    config, facts, subnets = cluster(2)
    s = classify(
        Support(engine="sglang", image=SGLANG_IMAGE, model_path=config.model.path, node="spark1"),
        _raw(
            engine_version="0.5.3.post3",
            archs_known={"Qwen3_5MoeForConditionalGeneration": False},
            autoconfig_error="ValueError: x",
            config_type_known=False,
        ),
    )
    plan = make_plan(config, facts, subnets, PlanOptions(engine="sglang", support=s))
    assert not plan.ok
    (err,) = [e for e in plan.errors if "cannot load" in e]
    assert "qwen3_5_moe" in err and "SGLang 0.5.3.post3" in err and "fix: " in err
    assert plan.to_json()["support"]["status"] == "unsupported" and plan.to_json()["runnable"] is False
    # an answer about another engine's image says nothing about this plan
    plan = make_plan(config, facts, subnets, PlanOptions(engine="vllm", support=s))
    assert not any("cannot load" in e for e in plan.errors) and plan.support is None


def test_plan_json_refusal_carries_the_fix(monkeypatch, tmp_path, capsys):
    from sparktui.cli import main
    from sparktui.core.deploy.operations import Operations

    from .test_plan_cli import CONFIG

    cfg_file = tmp_path / "sparktui.yaml"
    cfg_file.write_text(CONFIG)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    config, facts, subnets = cluster(2)
    s = classify(
        Support(engine="sglang", image=SGLANG_IMAGE, model_path=config.model.path, node="spark1"),
        _raw(
            engine_version="0.5.3.post3",
            archs_known={"Qwen3_5MoeForConditionalGeneration": False},
            autoconfig_error="ValueError: x",
            config_type_known=False,
        ),
    )

    class FakeCluster:
        def __init__(self, *a, **kw):
            self.nodes = {}

        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return None

    async def plan(self, opts, last_subnet=None):
        return make_plan(config, facts, subnets, PlanOptions(engine="sglang", support=s, tp=3))

    monkeypatch.setattr("sparktui.core.remote.ssh.Cluster", FakeCluster)
    monkeypatch.setattr(Operations, "plan", plan)
    assert main(["plan", "--config", str(cfg_file), "--engine", "sglang", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["errors"]) > 1 and "cannot load qwen3_5_moe" in doc["errors"][0]  # first, before the TP error
    assert "cannot load qwen3_5_moe" in doc["error"] and doc["fix"] == s.fix


async def test_a_model_copy_is_prepared_with_each_image_that_cannot_load_it(monkeypatch):
    """`t` and `sync model` ask the images before the weights move: a refusal makes the copy futile (a front
    asks first), a doubt is a warning, a supported image says nothing; an image copy asks nothing."""
    from sparktui.core.deploy.operations import Operations
    from sparktui.core.state.events import EventBus
    from sparktui.core.state.states import Op

    from ..fakes import FakeCluster

    config, _, _ = cluster(2)
    path = config.model.path
    lacks = Support(
        "sglang",
        "lmsysorg/sglang:spark",
        path,
        "spark1",
        status="unsupported",
        reason="SGLang 0.5.3.post3 has no Qwen3_5MoeForConditionalGeneration",
        fix="a newer image",
        model_type="qwen3_5_moe",
    )
    loads = Support("vllm", "nvcr.io/nvidia/vllm:26.10-py3", path, "spark1", status="supported")
    asked = []

    async def found(cl, cfg):
        asked.append(cfg)
        return {"sglang": lacks, "vllm": loads}

    monkeypatch.setattr("sparktui.core.plan.support.support_of_config", found)
    ops = Operations(FakeCluster(), config, EventBus())
    p = await ops.prepare(Op.SYNC_MODEL)
    assert len(p.futile) == 1 and not p.warnings and p.ok
    assert "lmsysorg/sglang:spark cannot load qwen3_5_moe" in p.futile[0] and "fix: a newer image" in p.futile[0]
    assert "for nothing with sglang" in p.futile[0]
    loads.status = "unknown"
    assert (await ops.prepare(Op.SYNC_MODEL)).warnings
    lacks.status = "supported"
    assert not (await ops.prepare(Op.SYNC_MODEL)).futile
    calls = len(asked)
    image = await ops.prepare(Op.SYNC_IMAGE)
    assert not image.futile and len(asked) == calls
