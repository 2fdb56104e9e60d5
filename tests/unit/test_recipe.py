"""sparkrun recipes as a plan's starting point: what maps, what passes through, what is reported."""
from __future__ import annotations

import time

import pytest

from sparktui.core.plan import PlanOptions, make_plan
from sparktui.core.recipe import RecipeError, apply_recipe, load_recipe, parse_recipe

from .test_plan import MODEL, cluster, flags, parse_run

# Shaped like sparkrun's own cluster recipes (RECIPES.md): defaults feed the {placeholders}.
SGLANG_RECIPE = """\
model: Qwen/Qwen3.5-122B-A10B-FP8
runtime: sglang
min_nodes: 2
container: scitrera/dgx-spark-sglang:0.5.8-t5
metadata:
  description: Qwen3.5 122B FP8 -- cluster only
  model_params: 122B
defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 2
  gpu_memory_utilization: 0.8
  max_model_len: 200000
  served_model_name: qwen35
  attention_backend: triton
  tool_call_parser: qwen3_coder
  leftover_knob: 7
env:
  HF_TOKEN: "${HF_TOKEN}"
  SGLANG_ENABLE_JIT_DEEPGEMM: "0"
mods: [fix-something]
command: |
  python3 -m sglang.launch_server \\
      --model-path {model} \\
      --served-model-name {served_model_name} \\
      --context-length {max_model_len} \\
      --mem-fraction-static {gpu_memory_utilization} \\
      --tp-size {tensor_parallel} \\
      --host {host} \\
      --port {port} \\
      --attention-backend {attention_backend} \\
      --tool-call-parser {tool_call_parser} \\
      --trust-remote-code
"""

VLLM_RECIPE = """\
model: nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4
runtime: vllm
container: scitrera/dgx-spark-vllm:0.16.0-t5
defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 2
  gpu_memory_utilization: 0.7
  max_model_len: 65536
  tool_call_parser: qwen3_coder
env:
  VLLM_ALLOW_LONG_MAX_MODEL_LEN: "1"
command: |
  vllm serve \\
      {model} \\
      --max-model-len {max_model_len} \\
      --gpu-memory-utilization {gpu_memory_utilization} \\
      -tp {tensor_parallel} \\
      --host {host} \\
      --port {port} \\
      --enable-auto-tool-choice \\
      --tool-call-parser {tool_call_parser} \\
      --distributed-executor-backend ray
"""


def test_sglang_recipe_maps_options_and_passes_other_flags():
    r = parse_recipe(SGLANG_RECIPE, "q.yaml", environ={"HF_TOKEN": "hf_from_env_123"})
    assert not r.errors
    assert r.engine == ("sglang", None)
    assert r.extra_args == ["--attention-backend", "triton", "--tool-call-parser", "qwen3_coder"]
    assert r.trust_remote_code
    assert r.env == {"HF_TOKEN": "hf_from_env_123", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
    opts, warnings = apply_recipe(r, PlanOptions(), MODEL, nodes=2, engine_given=False)
    assert (opts.engine, opts.image, opts.port, opts.tp, opts.mem_fraction, opts.max_model_len) == \
        ("sglang", "scitrera/dgx-spark-sglang:0.5.8-t5", 8000, 2, 0.8, 200000)
    assert opts.served_model_name == "qwen35" and opts.trust_remote_code is True
    # what sparktui does not use is reported, not dropped
    assert any(w.startswith("mods:") for w in warnings)
    assert any("defaults.leftover_knob" in w for w in warnings)
    assert not any("metadata" in w for w in warnings)


def test_unset_env_reference_is_left_out_with_a_warning():
    r = parse_recipe(SGLANG_RECIPE, "q.yaml", environ={})
    assert "HF_TOKEN" not in r.env
    assert any("HF_TOKEN" in w and "not set" in w for w in r.warnings)


def test_vllm_recipe_means_ray_and_drops_flags_the_plan_owns():
    r = parse_recipe(VLLM_RECIPE, "n.yaml", environ={})
    assert r.engine == ("vllm", "ray")
    assert r.extra_args == ["--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder"]
    assert any("--distributed-executor-backend" in w for w in r.warnings)
    opts, warnings = apply_recipe(r, PlanOptions(), MODEL, nodes=2, engine_given=False)
    assert (opts.engine, opts.mode, opts.tp) == ("vllm", "ray", 2)
    assert any("not the configured checkpoint" in w for w in warnings)


def test_command_line_wins_over_the_recipe():
    r = parse_recipe(SGLANG_RECIPE, "q.yaml", environ={})
    opts, _ = apply_recipe(r, PlanOptions(engine="sglang", port=31000, tp=4, extra_args=["--x"]), MODEL, nodes=4)
    assert opts.port == 31000 and opts.tp == 4
    assert opts.extra_args[-1] == "--x" and "--attention-backend" in opts.extra_args


def test_recipe_plan_carries_the_template_flags():
    config, facts, subnets = cluster(2)
    r = parse_recipe(SGLANG_RECIPE, "q.yaml", environ={})
    opts, _ = apply_recipe(r, PlanOptions(), MODEL, nodes=2, engine_given=False)
    for f in facts.values():
        f.docker.images[opts.image] = next(iter(f.docker.images.values()))
    plan = make_plan(config, facts, subnets, opts)
    assert plan.ok, plan.errors
    run = parse_run(plan.steps[-1].argv)
    fl = flags(run["cmd"][3:])
    assert fl["--port"] == "8000" and fl["--mem-fraction-static"] == "0.8" and fl["--context-length"] == "200000"
    assert fl["--attention-backend"] == "triton" and fl["--trust-remote-code"] is True
    assert run["env"]["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0"


def test_node_limits_and_host():
    text = SGLANG_RECIPE.replace("host: 0.0.0.0", "host: 127.0.0.1")
    r = parse_recipe(text, "q.yaml", environ={})
    _, warnings = apply_recipe(r, PlanOptions(), MODEL, nodes=1)
    assert any("at least 2 nodes" in w for w in warnings)
    assert any("127.0.0.1" in w and "0.0.0.0" in w for w in warnings)
    r = parse_recipe("model: x\nruntime: sglang\nsolo_only: true\n", "s.yaml", environ={})
    _, warnings = apply_recipe(r, PlanOptions(), MODEL, nodes=2)
    assert any("at most 1" in w for w in warnings)


def test_unsupported_runtime_and_bad_fields_are_errors_in_the_recipe():
    r = parse_recipe("model: Qwen/Qwen3-1.7B-GGUF:Q8_0\nruntime: llama-cpp\nmin_nodes: two\n", "l.yaml", environ={})
    assert any("llama-cpp" in e for e in r.errors)
    assert any("min_nodes" in e for e in r.errors)
    _, warnings = apply_recipe(r, PlanOptions(), MODEL)
    assert any(w.startswith("recipe error:") for w in warnings)


def test_unknown_placeholder_is_reported():
    r = parse_recipe("model: m\nruntime: vllm\ncommand: vllm serve {model} --foo {nothing}\n", "u.yaml", environ={})
    assert any("{nothing}" in w for w in r.warnings)


def test_unreadable_files(tmp_path):
    with pytest.raises(RecipeError, match="missing.yaml"):
        load_recipe(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: x\ndefaults:\n  port: [1\n")
    with pytest.raises(RecipeError, match=r"bad\.yaml:\d+:\d+"):
        load_recipe(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- a\n- b\n")
    with pytest.raises(RecipeError, match="mapping"):
        load_recipe(lst)


BOMB = "\n".join(["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
                 + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)])


@pytest.mark.parametrize("text,where,words", [
    ("model: " + "[" * 3000 + "]" * 3000 + "\n", "h.yaml:1:", "nesting deeper than"),
    (BOMB + "\nmodel: m\ndefaults: {x: *a9}\ncommand: vllm serve {x}\n", "h.yaml:", "aliases expand"),
    ("model: m\nmin_nodes: !!int abc\n", "h.yaml:2:12", "'abc' is not an integer"),
    ("model: m\nmin_nodes: " + "9" * 5000 + "\n", "h.yaml:2:12", "characters) is not an integer"),
    ("model: !!python/object:os.system x\n", "h.yaml:1:8", "could not determine a constructor"),
    ("model: m\ndefaults: {[1]: 2}\n", "h.yaml:2:", "unhashable key"),
])
def test_hostile_recipes_are_errors_at_their_place(text, where, words):
    t0 = time.monotonic()
    with pytest.raises(RecipeError) as e:
        parse_recipe(text, "h.yaml", environ={})
    assert str(e.value).startswith(where) and words in str(e.value) and len(str(e.value)) < 300
    assert time.monotonic() - t0 < 5


def test_bad_fields_are_errors_with_places_and_are_not_used():
    r = parse_recipe("model: [a, b]\nruntime: vllm\ncommand: {a: 1}\nenv: {A: [1]}\n"
                     "defaults: {port: .inf, tensor_parallel: .nan, gpu_memory_utilization: 1.5, max_model_len: -1}\n",
                     "f.yaml", environ={})
    text = "\n".join(r.errors)
    for piece in ("f.yaml:1:8: model must be text", "f.yaml:3:10: command must be text", "f.yaml:4:10: env 'A'",
                  "f.yaml:5:18: defaults.port inf", "f.yaml:5:41: defaults.tensor_parallel nan",
                  "defaults.gpu_memory_utilization 1.5", "defaults.max_model_len -1"):
        assert piece in text
    opts, _ = apply_recipe(r, PlanOptions(engine="vllm"), MODEL)
    assert (opts.port, opts.tp, opts.mem_fraction, opts.max_model_len) == (None, None, None, None)


def test_a_template_that_names_itself_does_not_explode():
    r = parse_recipe("model: m\ndefaults: {x: '{x}{x}{x}{x}'}\ncommand: vllm serve {x}\n", "s.yaml", environ={})
    assert any("grows past" in w for w in r.warnings) and r.extra_args == []


def test_non_utf8_and_huge_recipe_files(tmp_path):
    p = tmp_path / "b.yaml"
    p.write_bytes(b"model: ok\nruntime: \xff\xfe\n")
    with pytest.raises(RecipeError, match=r"b\.yaml:2:10: not UTF-8 text"):
        load_recipe(p)
    p.write_text("model: m\n" + "#" * (2 << 20))
    with pytest.raises(RecipeError, match="larger than 1 MiB"):
        load_recipe(p)
