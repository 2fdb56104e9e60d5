"""Recipe mods: files a mod puts in the workspace travel with the plan (written on each node, mounted
read-only, the engine's argument pointed at them); a mod that runs code in the container is refused with
the line that does it. A recipe's max_nodes and TP narrow the nodes."""

from __future__ import annotations

import os
import subprocess

import pytest

from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.recipes.recipe import apply_recipe, load_recipe

from .test_plan import MODEL, cluster, flags, parse_run

TEMPLATE = "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}\n"
RECIPE = """\
model: Qwen/Qwen3.5-122B-A10B-FP8
runtime: vllm
container: nvcr.io/nvidia/vllm:26.10-py3
mods: [{mods}]
defaults: {{port: 8000, tensor_parallel: {tp}, max_model_len: 131072}}
command: |
  vllm serve {{model}} --port {{port}} -tp {{tensor_parallel}} --max-model-len {{max_model_len}} \\
      --chat-template unsloth.jinja --distributed-executor-backend ray
"""
# The shape of eugr/spark-vllm-docker mods/fix-qwen3.5-chat-template/run.sh: copy one file into the workspace.
COPY_MOD = '#!/usr/bin/env bash\nset -e\ncp chat_template.jinja $WORKSPACE_DIR/unsloth.jinja\necho "use it"\n'


def _recipe(tmp_path, mods="fix-qwen3.5-chat-template", run_sh=COPY_MOD, tp=2, extra=""):
    mod = tmp_path / "mods" / "fix-qwen3.5-chat-template"
    mod.mkdir(parents=True, exist_ok=True)
    (mod / "run.sh").write_text(run_sh)
    (mod / "chat_template.jinja").write_text(TEMPLATE)
    path = tmp_path / "qwen.yaml"
    path.write_text(RECIPE.format(mods=mods, tp=tp) + extra)
    return load_recipe(path, environ={})


def _plan(recipe, n=2, opts=None):
    opts, notes = apply_recipe(recipe, opts or PlanOptions(), MODEL, nodes=n, engine_given=False)
    config, facts, subnets = cluster(n)
    return make_plan(config, facts, subnets, opts), notes


def test_a_mod_that_copies_a_file_is_carried_to_every_node_and_mounted(tmp_path):
    plan, notes = _plan(_recipe(tmp_path))
    assert plan.ok, plan.errors
    inside = "/sparktui/mods/fix-qwen3.5-chat-template/unsloth.jinja"
    assert any("fix-qwen3.5-chat-template applied" in n and inside in n for n in notes)
    assert not any("no mod carries" in n for n in notes)
    # each node writes the file before its container starts
    for node in ("spark1", "spark2"):
        mine = [s for s in plan.steps if s.node == node]
        assert mine[0].kind == "file" and mine[1].kind == "run"
    head_runs = [s for s in plan.steps if s.node == "spark1" and s.kind in ("run", "exec")]
    argv = " ".join(s.command for s in head_runs)
    assert f"--chat-template {inside}" in argv  # the engine's argument names the mounted file
    run = parse_run(head_runs[0].argv)
    mount = next(v for v in run["volumes"] if v.endswith(f":{inside}:ro"))
    # run the file step for real, with this test's HOME: the mount's source then holds the template
    home = tmp_path / "home"
    home.mkdir()
    step = next(s for s in plan.steps if s.node == "spark1" and s.kind == "file")
    subprocess.run(["sh", "-c", step.command], check=True, env={**os.environ, "HOME": str(home)}, timeout=30)
    source = mount.split(":")[0].replace("$HOME", str(home))
    assert open(source).read() == TEMPLATE
    # the journal and the plan show the step without the content
    assert "bytes of unsloth.jinja" in step.display and "im_start" not in step.display


def test_the_carried_file_changes_the_plan_id(tmp_path):
    a, _ = _plan(_recipe(tmp_path / "a"))
    r = _recipe(tmp_path / "b")
    (tmp_path / "b" / "mods" / "fix-qwen3.5-chat-template" / "chat_template.jinja").write_text(TEMPLATE + "x")
    b, _ = _plan(load_recipe(tmp_path / "b" / "qwen.yaml", environ={}))
    assert a.plan_id != b.plan_id and r is not None


@pytest.mark.parametrize(
    "mods,run_sh,why",
    [
        (
            "fix-qwen3.5-chat-template",
            "#!/bin/sh\nset -e\npatch -p1 -d /usr/lib/python3/site-packages < fix.diff\n",
            "runs `patch -p1",
        ),
        (
            "fix-qwen3.5-chat-template",
            "#!/bin/sh\npip install foo\ncp chat_template.jinja $WORKSPACE_DIR/unsloth.jinja\n",
            "runs `pip install foo`",
        ),
        ("'@eugr/fix-qwen3.5-chat-template'", COPY_MOD, "a registry mod"),
        ("fix-nowhere", COPY_MOD, "no mod directory with a run.sh at"),
    ],
)
def test_a_mod_sparktui_cannot_carry_is_refused_with_the_reason(tmp_path, mods, run_sh, why):
    plan, notes = _plan(_recipe(tmp_path, mods=mods, run_sh=run_sh))
    refused = [n for n in notes if n.startswith("mods:") and "not applied" in n]
    assert len(refused) == 1 and why in refused[0], notes
    assert not any(s.kind == "file" for s in plan.steps)
    # and the flag that needed the mod's file is named: the launch would fail without it
    assert any(n.startswith("--chat-template unsloth.jinja: no mod carries") and "was not applied" in n for n in notes)


def test_recipe_max_nodes_and_tp_narrow_the_nodes(tmp_path):
    plan, _ = _plan(_recipe(tmp_path, tp=2), n=4)  # TP 2 of 1 GPU per node: 2 nodes, head first
    assert plan.ok, plan.errors
    assert [n.name for n in plan.nodes] == ["spark1", "spark2"]
    run = parse_run([s for s in plan.steps if s.kind == "run"][0].argv)
    assert run["image"] == "nvcr.io/nvidia/vllm:26.10-py3"
    r = load_recipe(_write(tmp_path / "solo.yaml", "model: x\nruntime: sglang\nmax_nodes: 3\n"), environ={})
    plan, _ = _plan(r, n=4)
    assert plan.ok and [n.name for n in plan.nodes] == ["spark1", "spark2", "spark3"] and plan.tp == 3
    assert flags is not None


def _write(path, text):
    path.write_text(text)
    return path
