"""`sparktui plan`: arguments, exit codes, JSON, export and the rich rendering, over synthetic facts.

The SSH layer and the probe are replaced by fakes that hand back synthetic facts, so nothing is dialled.
"""

from __future__ import annotations

import json
import shlex

import pytest
from rich.console import Console

from sparktui.cli import build_parser, main
from sparktui.cli.common import CliExit
from sparktui.cli.plan import options_from_args, render_plan
from sparktui.core.config.config import load_config
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.remote.ssh import Result

from tests.fakes import FakeCluster, fixed_inventory
from .test_plan import MODEL, cluster, make_config
from .test_recipe import SGLANG_RECIPE

CONFIG = f"""\
cluster: sparks
nodes:
  - name: spark1
    host: 10.0.0.11
    role: head
  - name: spark2
    host: 10.0.0.12
model:
  name: qwen3.5-122b
  path: {MODEL}
"""
MODEL_CONFIG = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "text_config": {"num_attention_heads": 32}}


@pytest.fixture
def fake_cluster(monkeypatch, tmp_path):
    """Cluster and probe replaced; returns (config file, calls, facts) to adjust per test."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cfg_file = tmp_path / "sparktui.yaml"
    cfg_file.write_text(CONFIG)
    _, facts, subnets = cluster(2)
    calls: list = []

    def answer(node: str, cmd: str) -> Result:  # every node has the model's config.json
        calls.append((node, cmd))
        return Result(0, json.dumps(MODEL_CONFIG), "", 0.01)

    monkeypatch.setattr("sparktui.core.remote.ssh.Cluster", FakeCluster.replacing(answer))
    monkeypatch.setattr("sparktui.core.nodes.inventory.take_inventory", fixed_inventory(facts, subnets))
    return cfg_file, calls, facts


def _args(*argv: str):
    return build_parser().parse_args(["plan", *argv])


def test_bad_arguments_exit_2():
    config = make_config(2)
    for argv in (["--tp", "0"], ["--mem-fraction", "1.5"], ["--env", "NOVALUE"], ["--mode", "ray"], ["--port", "-1"]):
        with pytest.raises(CliExit) as e:
            options_from_args(_args(*argv), config)
        assert e.value.code == 2, argv
    with pytest.raises(SystemExit) as e:
        _args("--engine", "tgi")
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        _args("--json", "--export", "d")  # one output at a time


def test_arguments_become_options():
    opts, notes = options_from_args(
        _args(
            "--engine",
            "vllm",
            "--mode",
            "native",
            "--tp",
            "2",
            "--nodes",
            "spark2,spark1",
            "--iface",
            "enp1s0f1np1",
            "--env",
            "A=1=2",
            "--arg=--enforce-eager",
            "--dist-port",
            "29511",
        ),
        make_config(2),
    )
    assert (opts.engine, opts.mode, opts.tp, opts.nodes, opts.rendezvous) == (
        "vllm",
        "native",
        2,
        ["spark2", "spark1"],
        "enp1s0f1np1",
    )
    assert opts.env == {"A": "1=2"} and opts.extra_args == ["--enforce-eager"] and opts.dist_port == 29511
    assert notes == []


def test_recipe_under_the_arguments(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(SGLANG_RECIPE)
    opts, notes = options_from_args(_args("--recipe", str(recipe), "--port", "31000"), make_config(2))
    assert opts.engine == "sglang" and opts.port == 31000 and opts.tp == 2 and opts.mem_fraction == 0.8
    assert any(n.startswith("recipe: mods") for n in notes)
    with pytest.raises(CliExit) as e:
        options_from_args(_args("--recipe", str(tmp_path / "nope.yaml")), make_config(2))
    assert e.value.code == 2


def test_json_plan_end_to_end(fake_cluster, capsys):
    cfg_file, calls, _ = fake_cluster
    assert main(["plan", "--config", str(cfg_file), "--engine", "vllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {
        "engine",
        "engine_version",
        "engine_note",
        "mode",
        "tp",
        "pp",
        "rendezvous",
        "nodes",
        "fit",
        "fabric",
        "support",
        "warnings",
        "errors",
        "runnable",
        "after_load",
        "notes",
        "collectives",
    }
    assert out["mode"] == "ray" and out["tp"] == 2 and out["errors"] == []
    # the image was asked whether it loads the model, on the head; no answer is "could not check", not an error
    assert [node for node, cmd in calls if "@@sparktui-support" in cmd] == ["spark1"]
    assert out["support"]["status"] == "unknown" and any("could not check" in w for w in out["warnings"])
    # the image was asked about on the head only; a node that cannot say leaves the version unknown, not an error
    asked = [node for node, cmd in calls if "@@sparktui-image" in cmd]
    assert asked == ["spark1"]
    assert out["engine_version"] is None and "planned for the newest release" in out["engine_note"]
    assert out["rendezvous"]["head_ip"] == "192.168.100.10"
    # config.json was read from the model's node, with the path quoted as one word
    reads = [(node, cmd) for node, cmd in calls if "config.json" in cmd and "@@sparktui-support" not in cmd]
    path = shlex.quote(f"{MODEL}/config.json")
    assert reads == [("spark1", f"if [ -f {path} ]; then head -c {4 * 2**20 + 1} {path}; fi")]  # capped


def test_model_config_feeds_the_checks(fake_cluster, capsys):
    cfg_file, _, _ = fake_cluster
    MODEL_CONFIG["text_config"]["num_attention_heads"] = 3
    try:
        assert main(["plan", "--config", str(cfg_file), "--json"]) == 1
    finally:
        MODEL_CONFIG["text_config"]["num_attention_heads"] = 32
    out = json.loads(capsys.readouterr().out)
    assert any("3 attention heads" in e for e in out["errors"])


def test_plan_with_errors_exits_1(fake_cluster, capsys):
    cfg_file, _, facts = fake_cluster
    facts["spark2"].model.present = False
    assert main(["plan", "--config", str(cfg_file), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert any("spark2" in e and "missing" in e for e in out["errors"])


def test_export_writes_scripts(fake_cluster, tmp_path, capsys):
    cfg_file, _, _ = fake_cluster
    out_dir = tmp_path / "export"
    assert main(["plan", "--config", str(cfg_file), "--engine", "sglang", "--export", str(out_dir)]) == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["0-spark1.sh", "1-spark2.sh", "README.txt"]
    assert "0-spark1.sh" in capsys.readouterr().out


def test_text_output(fake_cluster, capsys):
    cfg_file, _, _ = fake_cluster
    assert main(["plan", "--config", str(cfg_file)]) == 0
    out = capsys.readouterr().out
    assert "launch order" in out and "plan is valid" in out


def test_bad_config_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: x\nnodes: 3\n")
    assert main(["plan", "--config", str(bad)]) == 2
    assert "bad.yaml:" in capsys.readouterr().err


def test_rendering_masks_secrets_and_shows_problems(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(CONFIG)
    config = load_config(cfg_file)
    config.docker.env = {"HF_TOKEN": "hf_zzzzzzzzzzzz"}
    _, facts, subnets = cluster(2)
    plan = make_plan(config, facts, subnets, PlanOptions(rendezvous="10.0.0.0/24", tp=4))
    console = Console(record=True, width=400)
    console.print(render_plan(plan))
    text = console.export_text()
    assert "hf_zzzzzzzzzzzz" not in text and "HF_TOKEN" in text and "****" in text
    # a management bootstrap with the fabric's HCAs for data: said as such, not warned as TCP
    assert "note: bootstrap over the management port" in text and "is the management subnet" not in text
    assert "error: TP x PP must equal" in text
    assert "spark1  rank 0 head  bootstrap enP7s7 10.0.0.11  data rocep1s0f1" in text


def test_a_recipe_with_bad_fields_exits_2_before_any_node_is_asked(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: m\nruntime: vllm\ndefaults: {port: .inf}\n")
    with pytest.raises(CliExit) as e:
        options_from_args(_args("--recipe", str(recipe)), make_config(2))
    assert e.value.code == 2 and f"{recipe}:3:18: defaults.port inf" in str(e.value)


@pytest.mark.parametrize(
    "argv,words", [(["--mem-fraction", "nan"], "--mem-fraction"), (["--port", "70000"], "--port must be a port")]
)
def test_plan_option_values_are_checked(argv, words):
    with pytest.raises(CliExit) as e:
        options_from_args(_args(*argv), make_config(2))
    assert e.value.code == 2 and words in str(e.value)
