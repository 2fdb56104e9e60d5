"""The support check for TensorRT-LLM images: the probe reads the PyTorch backend's registry from the package's
source (@register_auto_model) and looks up architectures[0] as AutoModelForCausalLM does; asked of the simulator's
tensorrt_llm package (sim/shims) through the same script and stand-in docker as the other engines."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sparktui.core.engines import trtllm
from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.plan.support import _JSON, Support, classify, probe_program
from sparktui.sim import sim_env

from . import test_support
from .test_support import SHIMS, ask, model

pytestmark = pytest.mark.unit
IMAGE = trtllm.DEFAULT_IMAGE
node = test_support.node  # the fixture: a node whose docker runs the probe under this Python with the shims
QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
}


def probe_names() -> dict:
    """The probe's functions, defined as the image's python3 defines them."""
    names: dict = {}
    exec(trtllm.SUPPORT_PROBE, names)
    return names


def test_the_simulated_image_loads_an_architecture_its_registry_lists(node, tmp_path):
    s = ask(node, "trtllm", model(tmp_path, QWEN3_MOE), image=IMAGE)
    assert s.status == "supported", s.line()
    assert s.engine_version == "1.3.0rc5"  # the tensorrt_llm package's release, not a package named "trtllm"
    assert s.quant_method == "fp8" and s.model_type == "qwen3_moe"


def test_an_architecture_missing_from_the_registry_is_refused_without_a_transformers_fallback(node, tmp_path):
    s = ask(
        node,
        "trtllm",
        model(tmp_path, {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_moe"}),
        image=IMAGE,
    )
    assert s.status == "unsupported" and s.refuses, s.line()
    assert "TensorRT-LLM 1.3.0rc5" in s.reason and "Qwen3_5MoeForConditionalGeneration" in s.reason
    assert "Transformers backend" not in s.line() and "TensorRT-LLM lists" in s.fix


def test_only_the_first_architecture_is_looked_up(node, tmp_path):
    # AutoModelForCausalLM reads architectures[0]; a known name later in the list does not help
    cfg = {"architectures": ["SparktuiNoSuchForCausalLM", "LlamaForCausalLM"], "model_type": "llama"}
    assert ask(node, "trtllm", model(tmp_path, cfg), image=IMAGE).status == "unsupported"


def test_a_quantization_format_the_release_does_not_read_is_refused(node, tmp_path):
    cfg = {**QWEN3_MOE, "quantization_config": {"quant_method": "awq"}}
    s = ask(node, "trtllm", model(tmp_path, cfg), image=IMAGE)
    assert s.status == "unsupported" and "'awq'" in s.reason
    modelopt = {**QWEN3_MOE, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}
    assert ask(node, "trtllm", model(tmp_path, modelopt, "m2"), image=IMAGE).status == "supported"


def test_an_image_whose_registry_cannot_be_read_cannot_check_and_says_why(node, tmp_path):
    # a tensorrt_llm package with neither registering source nor an importable registry
    pkg = tmp_path / "site" / "tensorrt_llm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '9.9.9'\n")
    node.env["PYTHONPATH"] = f"{tmp_path / 'site'}:{node.env['PYTHONPATH']}"
    s = ask(node, "trtllm", model(tmp_path, QWEN3_MOE), image=IMAGE)
    assert s.status == "unknown" and not s.refuses
    assert "model registry" in s.reason and "could not be read" in s.reason and "tensorrt_llm._torch" in s.reason


def test_the_registry_is_read_from_the_source_in_each_form_it_takes(tmp_path):
    models = tmp_path / "tensorrt_llm" / "_torch" / "models"
    models.mkdir(parents=True)
    for d in (tmp_path / "tensorrt_llm", tmp_path / "tensorrt_llm" / "_torch", models):
        (d / "__init__.py").write_text("raise ImportError('needs CUDA')\n")  # never imported
    (models / "modeling_a.py").write_text(
        "from .modeling_utils import register_auto_model\n"
        "from . import modeling_utils\n\n"
        '@register_auto_model("ArchAForCausalLM")\nclass A: pass\n\n'
        '@modeling_utils.register_auto_model("ArchBForCausalLM")\nclass B: pass\n\n'
        'register_auto_model("ArchCForCausalLM")(A)\n'
        "register_auto_model(NAME)(B)  # not a literal: not read\n"
    )
    (models / "modeling_broken.py").write_text("def (:\n")  # skipped, as an unimportable module would be
    (tmp_path / "tensorrt_llm" / "_torch" / "model_config.py").write_text(
        "class ModelConfig:\n"
        "    def load_hf_quant_config(hf_quant_config):\n"
        '        if hf_quant_config.get("quant_method") == "fp8" and hf_quant_config.get("x"):\n'
        "            pass\n"
        '        elif hf_quant_config.get("quant_method") == "nvfp4":\n'
        "            pass\n"
        "        if is_modelopt_quant_config(hf_quant_config):\n"
        "            pass\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        names = probe_names()
        assert names["registry_archs"]() == {"ArchAForCausalLM", "ArchBForCausalLM", "ArchCForCausalLM"}
        assert names["quant_methods"]() == {"fp8", "nvfp4", "modelopt"}
    finally:
        sys.path.remove(str(tmp_path))
    assert "tensorrt_llm" not in sys.modules


@pytest.mark.parametrize(
    "cfg, asked",
    [
        ({"architectures": ["LlamaForCausalLM", "Other"]}, ["LlamaForCausalLM"]),
        # an Eagle3 draft checkpoint (draft_vocab_size): "EAGLE3" + the name with its "Eagle3" removed
        ({"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 32000}, ["EAGLE3LlamaForCausalLM"]),
        ({"architectures": []}, []),
        ({}, []),
    ],
)
def test_lookup_takes_the_names_tensorrt_llm_resolves(cfg, asked):
    assert probe_names()["lookup_archs"](cfg) == asked


def test_the_simulated_registry_is_what_the_probe_reads():
    # the shim registers by decorator on import; the probe reads the same decorators without importing
    code = "import json, tensorrt_llm._torch.models as m; print(json.dumps(sorted(m.MODEL_CLASS_MAPPING)))"
    imported = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], env=sim_env(), capture_output=True, text=True, timeout=60, check=True
        ).stdout
    )
    prog = trtllm.SUPPORT_PROBE + "\nimport json\nprint(json.dumps(sorted(registry_archs())))\n"
    read = json.loads(
        subprocess.run(
            [sys.executable, "-c", prog], env=sim_env(), capture_output=True, text=True, timeout=60, check=True
        ).stdout
    )
    assert read == imported and "Qwen3MoeForCausalLM" in read


def test_the_simulated_server_refuses_what_the_registry_lacks_with_tensorrt_llms_words(tmp_path):
    path = model(tmp_path, {"architectures": ["SparktuiNoSuchForCausalLM"], "model_type": "llama"}, "nosuch")
    p = subprocess.run(
        ["trtllm-serve", path, "--backend", "pytorch", "--port", "1"],
        env=sim_env(speed=200.0),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1
    text = p.stdout + p.stderr
    assert "ValueError: Unknown architecture for AutoModelForCausalLM: SparktuiNoSuchForCausalLM" in text
    d = Diagnoser("trtllm", clock=lambda: 0.0)
    d.feed_lines(text.splitlines(), node="spark1")
    (problem,) = [x for x in d.problems if x.kind == "unsupported_model"]
    assert "SparktuiNoSuchForCausalLM" in problem.message and "sparktui check" in problem.hint


def test_the_probe_run_by_python_prints_one_marked_line(tmp_path):
    path = model(tmp_path, QWEN3_MOE)
    env = dict(sim_env(), PYTHONPATH=f"{SHIMS}:{sim_env()['PYTHONPATH']}")
    p = subprocess.run(
        [sys.executable, "-c", probe_program("trtllm"), path, trtllm.ENGINE.package],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    (line,) = [x for x in p.stdout.splitlines() if x.startswith(_JSON)]
    raw = json.loads(line[len(_JSON) :])
    assert raw["archs_known"] == {"Qwen3MoeForCausalLM": True} and raw["quant_known"] is True
    s = classify(Support(engine="trtllm", image=IMAGE, model_path=path, node="n"), raw)
    assert s.status == "supported", s.line()
