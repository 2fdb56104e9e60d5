"""NVIDIA's Local AI Inference Recipes as a plan's start: real files from NVIDIA/local-ai-inference-recipes
(tests/recipes/nvidia/SOURCES.md names each one's source and commit), and edits of them that must be refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparktui.cli.common import CliExit
from sparktui.cli.plan import options_from_args
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.recipes.recipe import apply_recipe, load_recipe, parse_recipe

from .test_plan import MODEL, cluster, flags, make_config, parse_run
from .test_plan_cli import _args

HERE = Path(__file__).resolve().parents[1] / "recipes" / "nvidia"
DEEPSEEK = HERE / "deepseek-v4-flash.dgx-spark-2gpu.vllm.yaml"
QWEN = HERE / "qwen3.8-flash-next.dgx-spark-2gpu.vllm.128gb.yaml"
MINIMAX = HERE / "minimax-m3.dgx-spark-4gpu.vllm.128gb.yaml"
GEMMA = HERE / "gemma-4-26b-a4b.geforce-rtx.llama-cpp.yaml"


def test_every_stored_recipe_names_its_source():
    listed = HERE.joinpath("SOURCES.md").read_text()
    for f in HERE.glob("*.yaml"):
        row = next((ln for ln in listed.splitlines() if ln.startswith(f"| {f.name} |")), "")
        assert re.search(r"github\.com/NVIDIA/local-ai-inference-recipes/blob/[0-9a-f]{40}/models/", row), f.name


def test_a_two_spark_recipe_maps_hardware_image_engine_and_flags():
    r = load_recipe(DEEPSEEK, environ={"HF_TOKEN": "hf_abc"})
    assert not r.errors and r.kind == "nvidia"
    assert r.engine == ("vllm", "native")  # --nnodes/--node-rank: vLLM's own multi-node mode, no Ray
    assert (r.min_nodes, r.max_nodes, r.min_memory_gb) == (2, 2, None)
    assert r.container == "eugr/spark-vllm:latest" and r.model == "deepseek-ai/DeepSeek-V4-Flash"
    assert r.defaults["tensor_parallel"] == "2" and r.defaults["gpu_memory_utilization"] == "0.85"
    assert r.trust_remote_code
    # flags the plan writes itself are gone, the rest pass through in order
    assert "--nnodes" not in r.extra_args and "--master-addr" not in r.extra_args and "--headless" not in r.extra_args
    i = r.extra_args.index("--speculative-config")
    assert r.extra_args[i + 1] == '{"method":"mtp","num_speculative_tokens":2}'
    assert "--default-chat-template-kwargs.reasoning_effort=high" in r.extra_args
    # the head's exports and the setup's literal -e values are the container env; per-node ones are the plan's
    assert r.env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert r.env["VLLM_FLOAT32_MATMUL_PRECISION"] == "high" and r.env["HF_TOKEN"] == "hf_abc"
    assert not {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NODE_RANK", "HEAD_IP", "MN_IF_NAME"} & set(r.env)


def test_the_recipe_plans_a_native_launch_with_its_flags_on_every_rank():
    config, facts, subnets = cluster(2)
    r = load_recipe(DEEPSEEK, environ={})
    opts, _ = apply_recipe(r, PlanOptions(), MODEL, nodes=2, engine_given=False)
    for f in facts.values():
        f.docker.images[opts.image] = next(iter(f.docker.images.values()))
    plan = make_plan(config, facts, subnets, opts)
    assert plan.ok, plan.errors
    assert (plan.mode, plan.tp) == ("native", 2)
    runs = [parse_run(s.argv) for s in plan.steps if s.argv[:2] == ["docker", "run"]]
    assert len(runs) == 2
    for rank, run in zip((1, 0), runs):  # the worker first, the head last: the recipe's notes say so
        fl = flags(run["cmd"])
        assert fl["--node-rank"] == str(rank) and fl["--load-format"] == "instanttensor"
        assert fl["--max-model-len"] == "500000" and fl["--gpu-memory-utilization"] == "0.85"
        assert fl["--served-model-name"] == "deepseek-ai/DeepSeek-V4-Flash"  # what the recipe's clients ask for
        assert ("--headless" in fl) == (rank > 0)
        # the recipe's own "$HEAD_IP" gives way to the plan's head address, once on every rank
        assert run["cmd"].count("--master-addr") == 1 and fl["--master-addr"] == plan.head_ip
        assert run["env"]["VLLM_USE_BREAKABLE_CUDAGRAPH"] == "1"


def test_memory_size_and_four_sparks_are_read():
    r = load_recipe(MINIMAX, environ={})
    assert not r.errors
    assert (r.min_nodes, r.max_nodes, r.min_memory_gb, r.hardware) == (4, 4, 128, "dgx-spark-4gpu")
    opts, warnings = apply_recipe(r, PlanOptions(), MODEL, nodes=2, engine_given=False)
    assert opts.node_limit == 4 and opts.tp == 4
    assert any("at least 4 nodes" in w for w in warnings)
    assert any("128 GB each" in w for w in warnings)
    assert any(w.startswith("limitation: The source reports") for w in warnings)  # NVIDIA's own caveat, kept


def test_a_recipe_for_other_hardware_is_refused_line_by_line():
    r = load_recipe(GEMMA, environ={})
    text = GEMMA.read_text().splitlines()
    assert r.engine is None
    where = {int(m[1]): m[2] for e in r.errors if (m := re.match(rf"{re.escape(str(GEMMA))}:(\d+): .*: `(.*)`$", e))}
    assert len(where) == len(r.errors) >= 4, r.errors
    for line, quoted in where.items():  # each quote is the line it points at
        assert text[line - 1].strip().startswith(quoted.rstrip("…")[:40])
    words = " ".join(r.errors)
    assert "hardware 'geforce-rtx'" in words and "backend 'llama-cpp'" in words and "llama-server" in words


def test_the_cli_refuses_it_before_any_node_is_asked():
    with pytest.raises(CliExit) as e:
        options_from_args(_args("--recipe", str(GEMMA)), make_config(2))
    assert e.value.code == 2 and f"{GEMMA}:19: hardware 'geforce-rtx'" in str(e.value)


def _edited(path: Path, old: str, new: str, count: int = 1) -> tuple[str, list[str]]:
    text = path.read_text()
    assert old in text
    text = text.replace(old, new, count)
    return text, parse_recipe(text, "e.yaml", environ={}).errors


def _line(text: str, needle: str, nth: int = 0) -> int:
    return [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln][nth]


def test_a_worker_command_that_differs_from_the_head_is_refused_at_its_line():
    text, errors = _edited(DEEPSEEK, "          --max-num-seqs 4 \\", "          --max-num-seqs 8 \\")
    assert errors == [
        f"e.yaml:{_line(text, '--max-num-seqs 8')}: --max-num-seqs differs between the head's and the "
        f"workers' commands; one plan runs every rank with the same flags: `--max-num-seqs 8 \\`"
    ]


def test_a_worker_export_the_head_lacks_is_refused():
    text, errors = _edited(
        DEEPSEEK, '        export VLLM_USE_BREAKABLE_CUDAGRAPH="1"', '        export VLLM_USE_BREAKABLE_CUDAGRAPH="0"'
    )
    line = _line(text, 'CUDAGRAPH="0"')
    assert len(errors) == 1 and errors[0].startswith(f"e.yaml:{line}: the workers export")


def test_a_shell_step_the_plan_cannot_run_is_refused():
    text, errors = _edited(
        QWEN, '    export B12X_POLICY_MODE="auto"\n', '    export B12X_POLICY_MODE="auto"\n    pip install b12x\n'
    )
    assert errors == [
        f"e.yaml:{_line(text, 'pip install')}: a shell step other than `export` before the engine's "
        f"command; sparktui runs only the engine in the image: `pip install b12x`"
    ]


def test_a_flag_given_as_a_shell_variable_is_refused_but_rendezvous_ones_are_the_plans():
    text, errors = _edited(MINIMAX, "      --block-size 128 \\", '      --block-size "$BLOCK" \\')
    assert len(errors) == 2  # the head's flag, and the workers' that now differs from it
    assert errors[0].startswith(f"e.yaml:{_line(text, '$BLOCK')}: $BLOCK is a shell variable")
    assert not load_recipe(MINIMAX, environ={}).errors  # "$HEAD_IP", "$MASTER_PORT", "$NODE_RANK" are


def test_a_node_count_that_disagrees_with_the_hardware_is_refused():
    text, errors = _edited(DEEPSEEK, "hardware: dgx-spark-2gpu", "hardware: dgx-spark-4gpu")
    assert any(e.startswith(f"e.yaml:{_line(text, 'node_count: 2')}: topology.node_count 2") for e in errors)
    assert any(e.startswith(f"e.yaml:{_line(text, '--nnodes 2')}: --nnodes 2 on dgx-spark-4gpu") for e in errors)


def test_sparkrun_recipes_are_still_read_as_sparkrun_recipes():
    from .test_recipe import VLLM_RECIPE

    r = parse_recipe(VLLM_RECIPE, "n.yaml", environ={})
    assert r.kind == "sparkrun" and r.engine == ("vllm", "ray")


def test_odd_values_anywhere_are_messages_never_crashes():
    import copy

    import yaml

    data = yaml.safe_load(MINIMAX.read_text())

    def paths(d, pre=()):
        items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
        for k, v in items:
            yield pre + (k,)
            yield from paths(v, pre + (k,))

    for path in list(paths(data)):
        for odd in (None, 3, True, "", [1, 2], {"a": 1}, [{"target": "workers", "command": 5}]):
            d = copy.deepcopy(data)
            spot = d
            for k in path[:-1]:
                spot = spot[k]
            spot[path[-1]] = odd
            r = parse_recipe(yaml.safe_dump(d), "f.yaml", environ={})
            assert isinstance(r.errors, list) and isinstance(r.warnings, list)
