"""sparkrun recipes as a plan's starting point: what maps, what passes through, what is reported."""

from __future__ import annotations

import time

import pytest

from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.recipes.recipe import RecipeError, apply_recipe, load_recipe, parse_recipe

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
    assert (opts.engine, opts.image, opts.port, opts.tp, opts.mem_fraction, opts.max_model_len) == (
        "sglang",
        "scitrera/dgx-spark-sglang:0.5.8-t5",
        8000,
        2,
        0.8,
        200000,
    )
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
    opts, warnings = apply_recipe(r, PlanOptions(nodes=["spark1", "spark2"]), MODEL, nodes=2)
    assert any("at most 1" in w for w in warnings)  # nodes named: said, and the user's choice stands
    assert opts.node_limit is None
    opts, _ = apply_recipe(r, PlanOptions(), MODEL, nodes=2)
    assert opts.node_limit == 1  # no nodes named: the plan takes the head alone


def test_unsupported_runtime_and_bad_fields_are_errors_in_the_recipe():
    r = parse_recipe("model: Qwen/Qwen3-1.7B-GGUF:Q8_0\nruntime: llama-cpp\nmin_nodes: two\n", "l.yaml", environ={})
    assert any("llama-cpp" in e for e in r.errors)
    assert any("min_nodes" in e for e in r.errors)
    # the runtimes offered instead are every engine's in the registry, none written by hand
    from sparktui.core.engines import ENGINES

    offered = next(e for e in r.errors if "llama-cpp" in e)
    assert all(rt in offered for e in ENGINES.values() for rt in e.recipe_runtimes), offered
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


BOMB = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
)


@pytest.mark.parametrize(
    "text,where,words",
    [
        ("model: " + "[" * 3000 + "]" * 3000 + "\n", "h.yaml:1:", "nesting deeper than"),
        (BOMB + "\nmodel: m\ndefaults: {x: *a9}\ncommand: vllm serve {x}\n", "h.yaml:", "aliases expand"),
        ("model: m\nmin_nodes: !!int abc\n", "h.yaml:2:12", "'abc' is not an integer"),
        ("model: m\nmin_nodes: " + "9" * 5000 + "\n", "h.yaml:2:12", "characters) is not an integer"),
        ("model: !!python/object:os.system x\n", "h.yaml:1:8", "could not determine a constructor"),
        ("model: m\ndefaults: {[1]: 2}\n", "h.yaml:2:", "unhashable key"),
    ],
)
def test_hostile_recipes_are_errors_at_their_place(text, where, words):
    t0 = time.monotonic()
    with pytest.raises(RecipeError) as e:
        parse_recipe(text, "h.yaml", environ={})
    assert str(e.value).startswith(where) and words in str(e.value) and len(str(e.value)) < 300
    assert time.monotonic() - t0 < 5


def test_bad_fields_are_errors_with_places_and_are_not_used():
    r = parse_recipe(
        "model: [a, b]\nruntime: vllm\ncommand: {a: 1}\nenv: {A: [1]}\n"
        "defaults: {port: .inf, tensor_parallel: .nan, gpu_memory_utilization: 1.5, max_model_len: -1}\n",
        "f.yaml",
        environ={},
    )
    text = "\n".join(r.errors)
    for piece in (
        "f.yaml:1:8: model must be text",
        "f.yaml:3:10: command must be text",
        "f.yaml:4:10: env 'A'",
        "f.yaml:5:18: defaults.port inf",
        "f.yaml:5:41: defaults.tensor_parallel nan",
        "defaults.gpu_memory_utilization 1.5",
        "defaults.max_model_len -1",
    ):
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


# The runtime as sparkrun 0.4.2 resolves it: sparkrun/core/recipe.py, the resolvers in _RECIPE_RESOLVERS
# (_resolve_runtime_from_command_hint, _resolve_v1_migration, _resolve_eugr_signals, _resolve_vllm_variant),
# mirrored there by resolve_runtime() and resolve_builder().
@pytest.mark.parametrize(
    "text,runtime,engine",
    [
        (
            "model: m\ncommand: python3 -m sglang.launch_server --model-path {model} --tp-size 2\n",
            "sglang",
            ("sglang", None),
        ),
        (
            "model: m\ncommand: |\n  python -m sglang.launch_server \\\n    --model-path {model}\n",
            "sglang",
            ("sglang", None),
        ),
        ("model: m\ncommand: sglang serve --model-path {model}\n", "sglang", ("sglang", None)),
        ("model: m\ncommand: vllm serve {model} -tp 2\n", "vllm-distributed", ("vllm", "native")),
        ("model: m\nruntime: vllm\n", "vllm-distributed", ("vllm", "native")),
        ("model: m\n", "vllm-distributed", ("vllm", "native")),
        ("model: m\ncommand: vllm serve {model} --distributed-executor-backend ray\n", "vllm-ray", ("vllm", "ray")),
        ("model: m\nruntime: vllm\ndefaults: {distributed_executor_backend: Ray}\n", "vllm-ray", ("vllm", "ray")),
        # sparkrun's hint wants a space before ray: the = spelling is not a Ray hint there either
        (
            "model: m\ncommand: vllm serve {model} --distributed-executor-backend=ray\n",
            "vllm-distributed",
            ("vllm", "native"),
        ),
        # an explicit runtime wins over the command's hint
        (
            "model: m\nruntime: vllm-ray\ncommand: python3 -m sglang.launch_server --model-path {model}\n",
            "vllm-ray",
            ("vllm", "ray"),
        ),
        ("model: m\nruntime: sglang\ncommand: vllm serve {model}\n", "sglang", ("sglang", None)),
        ("model: m\nruntime: ''\ncommand: sglang serve --model-path {model}\n", "sglang", ("sglang", None)),
        # v1 recipes keep their runtime; only the builder changes
        (
            "model: m\nrecipe_version: '1'\ncommand: vllm serve {model} --distributed-executor-backend ray\n",
            "vllm-ray",
            ("vllm", "ray"),
        ),
        ("model: m\nrecipe_version: '1'\n", "vllm-distributed", ("vllm", "native")),
    ],
)
def test_runtime_resolves_as_sparkrun_resolves_it(text, runtime, engine):
    r = parse_recipe(text, "r.yaml", environ={})
    assert not r.errors
    assert (r.runtime, r.engine) == (runtime, engine)
    if "runtime:" not in text or "runtime: vllm\n" in text or "runtime: ''" in text:
        assert any(w.startswith(f"runtime {runtime}:") for w in r.warnings), r.warnings  # said, not guessed quietly


def test_an_sglang_command_recipe_without_runtime_plans_sglang_not_ray():
    config, facts, subnets = cluster(2)
    text = SGLANG_RECIPE.replace("runtime: sglang\n", "")
    r = parse_recipe(text, "q.yaml", environ={})
    opts, _ = apply_recipe(r, PlanOptions(engine="sglang"), MODEL, nodes=2, engine_given=False)
    assert (opts.engine, opts.mode) == ("sglang", None)
    for f in facts.values():
        f.docker.images[opts.image] = next(iter(f.docker.images.values()))
    plan = make_plan(config, facts, subnets, opts)
    assert plan.ok, plan.errors
    assert plan.engine == "sglang" and plan.mode != "ray"
    assert not any("ray" in " ".join(s.argv) for s in plan.steps)


@pytest.mark.parametrize(
    "text,builder",
    [
        ("model: m\nrecipe_version: '1'\n", "eugr"),
        ("model: m\nrecipe_version: 1\n", "eugr"),
        ("model: m\nrecipe_version: '2'\n", ""),
        ("model: m\n", ""),
        ("model: m\nruntime: sglang\nrecipe_version: '1'\n", ""),
        ("model: m\ncontainer: ghcr.io/spark-arena/dgx-vllm-eugr-nightly-tf5:latest\n", "eugr"),
    ],
)
def test_only_v1_recipes_and_eugr_signals_mean_the_eugr_builder(text, builder):
    r = parse_recipe(text, "r.yaml", environ={})
    assert r.builder == builder
    assert any(w.startswith("builder eugr") for w in r.warnings) == bool(builder)


COMMANDLESS = """\
model: Qwen/Qwen3-30B-A3B
runtime: {runtime}
defaults:
  port: 8000
  tensor_parallel: 2
  gpu_memory_utilization: 0.7
  max_model_len: 32768
  trust_remote_code: true
  kv_cache_dtype: fp8
  max_num_seqs: 16
  chunked_prefill: 4096
  enable_prefix_caching: false
  speculative_config: {{method: ngram, num_speculative_tokens: 3}}
  executor: docker
  wild_knob: 3
"""


def test_a_commandless_recipe_becomes_vllm_flags():
    """sparkrun 0.4.2 runtimes/_vllm_common.py VLLM_FLAG_MAP / VLLM_NEGATABLE_BOOL_FLAGS, rendered as
    runtimes/base.py build_flags_from_map and render_flag_value do."""
    r = parse_recipe(COMMANDLESS.format(runtime="vllm"), "c.yaml", environ={})
    opts, warnings = apply_recipe(r, PlanOptions(), MODEL, nodes=2, engine_given=False)
    assert (opts.engine, opts.mode, opts.port, opts.tp, opts.mem_fraction, opts.max_model_len) == (
        "vllm",
        "native",
        8000,
        2,
        0.7,
        32768,
    )
    assert opts.trust_remote_code is True
    fl = flags(opts.extra_args)
    assert fl["--kv-cache-dtype"] == "fp8" and fl["--max-num-seqs"] == "16"
    assert fl["--no-enable-prefix-caching"] is True  # on by default in vLLM: false must be said
    assert fl["--speculative-config"] == '{"method":"ngram","num_speculative_tokens":3}'
    assert "--chunked-prefill-size" not in fl
    assert any(w.startswith("defaults.chunked_prefill: vLLM has no flag") for w in warnings)
    assert any(w.startswith("defaults.wild_knob: no engine flag") for w in warnings)
    assert any(w.startswith("defaults.executor: read by sparkrun itself") for w in warnings)


def test_a_commandless_recipe_becomes_sglang_flags_in_the_plan():
    """sparkrun 0.4.2 runtimes/sglang.py _SGLANG_FLAG_MAP: max_num_seqs is --max-running-requests there."""
    config, facts, subnets = cluster(2)
    r = parse_recipe(COMMANDLESS.format(runtime="sglang"), "c.yaml", environ={})
    opts, warnings = apply_recipe(r, PlanOptions(), MODEL, nodes=2, engine_given=False)
    for f in facts.values():
        f.docker.images[opts.image] = next(iter(f.docker.images.values()))
    plan = make_plan(config, facts, subnets, opts)
    assert plan.ok, plan.errors
    fl = flags(parse_run(plan.steps[-1].argv)["cmd"][3:])
    assert fl["--kv-cache-dtype"] == "fp8" and fl["--max-running-requests"] == "16"
    assert fl["--chunked-prefill-size"] == "4096" and fl["--trust-remote-code"] is True
    assert fl["--mem-fraction-static"] == "0.7" and fl["--context-length"] == "32768"
    assert "--max-num-seqs" not in fl and "--no-enable-prefix-caching" not in fl
    for key in ("enable_prefix_caching", "speculative_config", "wild_knob", "executor"):
        assert any(w.startswith(f"defaults.{key}:") for w in warnings), key


def test_commandless_flags_follow_the_engine_planned_and_the_user_still_wins():
    r = parse_recipe(COMMANDLESS.format(runtime="sglang"), "c.yaml", environ={})
    opts, warnings = apply_recipe(
        r, PlanOptions(engine="vllm", trust_remote_code=False, extra_args=["--max-num-seqs", "4"]), MODEL, nodes=2
    )
    assert opts.engine == "vllm" and opts.trust_remote_code is False
    assert opts.extra_args[-2:] == ["--max-num-seqs", "4"] and "--max-running-requests" not in opts.extra_args
    assert opts.extra_args.index("--max-num-seqs") < len(opts.extra_args) - 2  # the recipe's, then the user's
    assert any("recipe is for sglang" in w for w in warnings)


def test_commandless_switch_that_is_not_a_switch_is_reported():
    r = parse_recipe(
        "model: m\nruntime: vllm\ndefaults: {enforce_eager: maybe, trust_remote_code: sure}\n", "s.yaml", environ={}
    )
    opts, warnings = apply_recipe(r, PlanOptions(), MODEL, engine_given=False)
    assert "--enforce-eager" not in opts.extra_args and opts.trust_remote_code is None
    assert any("defaults.enforce_eager: 'maybe' is neither" in w for w in warnings)
    assert any("defaults.trust_remote_code: 'sure' is neither" in w for w in warnings)
