"""Plan validation: user mistakes become plain errors and warnings, never exceptions."""

from __future__ import annotations

import os
import subprocess

import pytest

from sparktui.core.engines.common import EnvFlag, Home, Joined, render, volume_word
from sparktui.core.engines.vllm import rank_wait_words
from sparktui.core.plan.plan import PlanOptions, make_plan

from .test_plan import (
    GIB,
    IMAGE_ID,
    MODEL,
    SGLANG_IMAGE,
    cluster,
    fabric_ip,
    flags,
    make_config,
    node_name,
    parse_run,
    plan_for,
)


def _plan(n=2, config=None, facts_opts=None, **opts):
    config, facts, subnets = cluster(n, config, **(facts_opts or {}))
    return make_plan(config, facts, subnets, PlanOptions(**opts)), config, facts, subnets


def _has(msgs: list[str], *words: str) -> bool:
    return any(all(w in m for w in words) for m in msgs)


def test_json_has_exactly_the_documented_shape():
    plan, _ = plan_for(2, engine="vllm", mode="ray")
    j = plan.to_json()
    assert set(j) == {
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
        "warnings",
        "errors",
        "runnable",
        "support",
        "after_load",
        "notes",
        "collectives",
    }
    assert j["fabric"]["line_rate_mbps"] == 200000 and j["fabric"]["halves_in_use"] == {"spark1": 1, "spark2": 1}
    assert j["engine_version"] is None and "planned for the newest release" in j["engine_note"]
    assert j["rendezvous"] == {"subnet": "192.168.100.0/24", "head_ip": fabric_ip(0), "port": 6379}
    assert set(j["nodes"][0]) == {"name", "rank", "role", "iface", "ip", "rdma", "env", "commands"}
    assert j["nodes"][0]["role"] == "head" and j["nodes"][1]["role"] == "worker"
    # head: ray start, the join wait, the non-carry-over list, vllm serve; worker: ray start
    assert len(j["nodes"][0]["commands"]) == 4 and len(j["nodes"][1]["commands"]) == 1


def test_tp_times_pp_must_use_every_gpu():
    plan, *_ = _plan(4, tp=2, nodes=["spark1", "spark2", "spark3", "spark4"])  # nodes named: all of them
    assert _has(plan.errors, "2 x 1 = 2", "4")
    plan, *_ = _plan(4, tp=3)  # 3 GPUs of 1 fill 3 nodes
    assert plan.ok and [n.name for n in plan.nodes] == ["spark1", "spark2", "spark3"]
    plan, *_ = _plan(2, facts_opts={"gpus": 4}, tp=4, pp=2)
    assert plan.ok, plan.errors  # 2 nodes x 4 GPUs
    plan, *_ = _plan(2, facts_opts={"gpus": 4})
    assert plan.tp == 8 and plan.ok


def test_tp_must_divide_attention_heads_when_known():
    cfg = {"architectures": ["X"], "num_attention_heads": 64, "num_key_value_heads": 4}
    plan, *_ = _plan(3, model_config=cfg)
    assert _has(plan.errors, "TP 3", "64 attention heads")
    # multimodal checkpoints nest the text model's sizes
    plan, *_ = _plan(3, model_config={"text_config": {"num_attention_heads": 32}})
    assert _has(plan.errors, "32 attention heads")
    plan, *_ = _plan(4, model_config=cfg)
    assert plan.ok, plan.errors
    plan, *_ = _plan(8, model_config={"num_attention_heads": 64, "num_key_value_heads": 12})
    assert _has(plan.errors, "12 KV heads")


def test_ports_must_be_valid_and_distinct():
    plan, *_ = _plan(engine="sglang", port=29500)
    assert _has(plan.errors, "HTTP port", "dist port", "29500")
    plan, *_ = _plan(engine="sglang", port=70000)
    assert _has(plan.errors, "70000", "not a valid")
    # the Ray port only matters in ray mode; the dist port not there
    plan, *_ = _plan(engine="vllm", mode="native", ray_port=8000)
    assert plan.ok, plan.errors
    plan, *_ = _plan(engine="vllm", mode="ray", ray_port=8000)
    assert _has(plan.errors, "ray port", "8000")
    plan, *_ = _plan(engine="vllm", mode="ray", dist_port=8000)
    assert plan.ok, plan.errors


def test_unknown_engine_or_mode_is_an_error_not_an_exception():
    plan, *_ = _plan(engine="tgi")
    assert _has(plan.errors, "unknown engine") and plan.steps == []
    plan, *_ = _plan(engine="sglang", mode="ray")
    assert _has(plan.errors, "no mode 'ray'")


def test_default_rendezvous_is_the_fabric_and_a_management_bootstrap_keeps_rdma_data():
    plan, *_ = _plan()
    assert plan.subnet == "192.168.100.0/24" and not plan.warnings
    plan, *_ = _plan(rendezvous="10.0.0.0/24")
    assert plan.subnet == "10.0.0.0/24" and plan.head_ip == "10.0.0.11"
    # NVIDIA's NCCL setup: bootstrap on the management port, data over the fabric's HCAs; not TCP
    assert not _has(plan.warnings, "12.7 tok/s") and not _has(plan.warnings, "falls back to TCP"), plan.warnings
    assert _has(plan.notes, "bootstrap over the management port", "192.168.100.0/24")
    assert all(n.rdma == "rocep1s0f1" for n in plan.nodes)
    run = parse_run(plan.steps[0].argv)
    assert run["env"]["NCCL_SOCKET_IFNAME"] == "enP7s7"
    assert run["env"]["NCCL_IB_DISABLE"] == "0" and run["env"]["NCCL_IB_HCA"] == "rocep1s0f1"


@pytest.mark.parametrize("spec", ["192.168.100.0/24", "192.168.100.10", "enp1s0f1np1", "enP2p1s0f1np1"])
def test_rendezvous_spec_forms(spec):
    plan, *_ = _plan(rendezvous=spec)
    assert plan.subnet == "192.168.100.0/24", plan.errors


def test_rendezvous_spec_that_matches_nothing():
    plan, *_ = _plan(rendezvous="172.16.0.0/16")
    assert _has(plan.errors, "rendezvous 172.16.0.0/16", "Choices")
    assert plan.steps == []


def test_no_subnet_joining_all_nodes():
    config, facts, subnets = cluster(3)
    for s in subnets:
        del s.nodes[node_name(2)]
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert _has(plan.errors, "no subnet joins all nodes")


def test_subnet_without_rdma_and_down_interface():
    config, facts, subnets = cluster(2, rdma=None)
    subnets[0].rdma = False
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert _has(plan.warnings, "no RDMA", "TCP sockets")
    subnets[0].up = False
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert _has(plan.errors, "interface down")


def test_no_infiniband_device_sets_nothing_and_passes_no_device():
    plan, *_ = _plan(facts_opts={"ib": False})
    run = parse_run(plan.steps[0].argv)
    assert run["devices"] == []
    assert "NCCL_IB_DISABLE" not in run["env"] and "NCCL_IB_HCA" not in run["env"]
    assert _has(plan.warnings, "no /dev/infiniband")


def test_model_must_be_on_every_node():
    config, facts, subnets = cluster(3)
    facts[node_name(1)].model.present = False
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert _has(plan.errors, node_name(1), "missing", MODEL)
    assert not _has(plan.errors, node_name(2))
    plan = make_plan(config, facts, subnets, PlanOptions(model_path="models/relative"))
    assert _has(plan.errors, "must be absolute")


def test_an_incomplete_model_copy_is_a_plan_error_not_a_model():
    config, facts, subnets = cluster(3)
    m = facts[node_name(2)].model
    m.present, m.incomplete = False, "copy model-x from spark1 started 2026-01-01 10:00:00 UTC"
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert not plan.ok
    assert _has(plan.errors, node_name(2), "model incomplete", "copy model-x from spark1", "sparktui sync model")
    assert not _has(plan.errors, node_name(2), "missing")


def test_image_must_be_on_every_node_with_one_id():
    config, facts, subnets = cluster(3)
    facts[node_name(2)].docker.images = {SGLANG_IMAGE: "sha256:" + "cd" * 32}
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert _has(plan.errors, "differs between nodes")
    del facts[node_name(2)].docker.images[SGLANG_IMAGE]
    facts[node_name(2)].docker.images["other:1"] = IMAGE_ID
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert _has(plan.errors, node_name(2), "is not there")
    # `docker images` shows 12 characters; a full ID elsewhere is the same image
    facts[node_name(2)].docker.images = {"docker.io/" + SGLANG_IMAGE: IMAGE_ID[7:19]}
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert plan.ok, plan.errors


def test_unreachable_and_unequal_nodes():
    config, facts, subnets = cluster(3)
    facts[node_name(1)].reachable = False
    facts[node_name(1)].error = "connection refused"
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert _has(plan.errors, node_name(1), "unreachable", "connection refused")
    config, facts, subnets = cluster(2)
    facts[node_name(1)].gpu.count = 2
    plan = make_plan(config, facts, subnets, PlanOptions())
    assert _has(plan.errors, "different GPU counts")
    plan = make_plan(config, facts, subnets, PlanOptions(nodes=["spark1", "nope"]))
    assert _has(plan.errors, "unknown node 'nope'")


def test_node_order_sets_ranks():
    config, facts, subnets = cluster(3)
    plan = make_plan(config, facts, subnets, PlanOptions(nodes=["spark3", "spark1", "spark2"]))
    assert plan.ok, plan.errors
    assert [(n.name, n.rank, n.role) for n in plan.nodes] == [
        ("spark3", 0, "head"),
        ("spark1", 1, "worker"),
        ("spark2", 2, "worker"),
    ]
    assert plan.head_ip == fabric_ip(2)


def test_fit_errors_become_plan_errors():
    plan, *_ = _plan(2, facts_opts={"model_bytes": 300 * GIB})
    assert _has(plan.errors, "fit:", "do not fit")
    plan, *_ = _plan(2, facts_opts={"model_bytes": 170 * GIB})
    assert plan.ok and _has(plan.warnings, "fit:", "headroom")


def test_secrets_are_masked_when_shown_and_real_when_run():
    config = make_config(2)
    config.docker.env = {"HF_TOKEN": "hf_abcdefgh1234"}
    plan, *_ = _plan(2, config=config, engine="vllm", mode="ray", extra_args=["--api-key", "sk-live-99999"])
    shown = str(plan.to_json())
    assert "hf_abcdefgh1234" not in shown and "sk-live-99999" not in shown
    assert plan.nodes[0].env["HF_TOKEN"] == "****"
    env = parse_run(plan.steps[0].argv)["env"]  # the container's env: what vLLM reads its key from
    assert env["HF_TOKEN"] == "hf_abcdefgh1234" and env["VLLM_API_KEY"] == "sk-live-99999"
    for step in plan.steps:  # no command line holds a value: an env file on stdin carries them
        assert "sk-live-99999" not in step.command + step.display and "hf_abcdefgh1234" not in step.command
    assert plan.steps[0].stdin == "HF_TOKEN=hf_abcdefgh1234\nVLLM_API_KEY=sk-live-99999\n"
    assert "--env-file" in plan.steps[0].command and plan.steps[-1].secrets == []


def test_env_overrides_win_and_warn_for_per_node_values():
    plan, *_ = _plan(env={"NCCL_SOCKET_IFNAME": "eth9", "MY_FLAG": "1", "bad name": "x"})
    env = parse_run(plan.steps[0].argv)["env"]
    assert env["NCCL_SOCKET_IFNAME"] == "eth9" and env["MY_FLAG"] == "1"
    assert _has(plan.warnings, "NCCL_SOCKET_IFNAME=eth9")
    assert _has(plan.errors, "'bad name'")


@pytest.mark.parametrize(
    "style,expect",
    [
        ("gpus-all", ["--gpus", "all"]),
        ("runtime-nvidia", ["--runtime", "nvidia"]),
        ("cdi", ["--device", "nvidia.com/gpu=all"]),
        ("none", []),
    ],
)
def test_gpu_styles(style, expect):
    config = make_config(2, gpu_style=style, shm_size="16g", extra_args=["--privileged"])
    plan, *_ = _plan(2, config=config)
    argv = plan.steps[0].argv
    joined = " ".join(argv)
    assert (" ".join(expect) in joined) if expect else ("--gpus" not in argv and "--runtime" not in argv)
    run = parse_run(argv)
    assert run["--shm-size"] == "16g" and "--privileged" in run["flags"]
    assert (run["env"].get("NVIDIA_VISIBLE_DEVICES") == "all") == (style == "runtime-nvidia")


def test_deployment_name_is_made_docker_safe():
    plan, *_ = _plan(deployment="my lab/2")
    assert plan.deployment == "my-lab-2"
    assert parse_run(plan.steps[0].argv)["--name"] == "sparktui-my-lab-2-sglang-1"


def test_trust_remote_code_follows_auto_map():
    plan, *_ = _plan(model_config={"num_attention_heads": 8, "auto_map": {"AutoConfig": "x.Config"}})
    assert flags(parse_run(plan.steps[0].argv)["cmd"])["--trust-remote-code"] is True
    plan, *_ = _plan(model_config={"num_attention_heads": 8})
    assert "--trust-remote-code" not in plan.steps[0].argv


def test_home_volume_expands_remotely_and_stays_one_word(tmp_path):
    word = volume_word("~/my dir;touch x:/root/.cache/huggingface")
    assert isinstance(word, Joined) and isinstance(word.parts[0], Home)
    line = "printf '%s\\n' " + render([word])
    out = subprocess.run(
        ["sh", "-c", line],
        capture_output=True,
        text=True,
        timeout=10,
        env={"HOME": "/home/u", "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert out.stdout == "/home/u/my dir;touch x:/root/.cache/huggingface\n"
    assert not (tmp_path / "x").exists()
    assert render([EnvFlag("A", "$(id)")]) == "'A=$(id)'"


def test_rank_wait_says_dialing_only_once_the_headless_rank_logged_it(tmp_path):
    log = tmp_path / "log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"  # stands in for docker: logs prints the file, inspect says the state
    docker.write_text(f'#!/bin/sh\ncase "$1" in logs) cat {log};; inspect) echo exited;; esac\n')
    docker.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    line = render(rank_wait_words("sparktui-x-rank1"))

    def answer() -> str:
        return subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=15, env=env).stdout.strip()

    log.write_text("INFO [serve.py:224] non-default args: {}\n")
    assert answer() == "exited"
    log.write_text(
        "INFO [serve.py:224] Launching vLLM (v0.33.0) headless multiproc executor, with head node "
        "address 10.0.0.1:29500 for torch.distributed process group.\n"
    )
    assert answer() == "dialing"


def test_tp_narrows_the_nodes_when_none_are_named():
    plan, *_ = _plan(4, tp=2)
    assert plan.ok, plan.errors
    assert [n.name for n in plan.nodes] == ["spark1", "spark2"] and {s.node for s in plan.steps} == {"spark1", "spark2"}
    assert _has(plan.warnings, "using 2 of 4 nodes (spark1, spark2)", "TP 2 x PP 1", "--nodes picks others")
    plan, *_ = _plan(2, facts_opts={"gpus": 2}, tp=3)  # 3 does not fill whole nodes of 2: no guess, the error
    assert _has(plan.errors, "3 x 1 = 3", "4")


def test_a_node_limit_narrows_the_nodes_head_first():
    plan, *_ = _plan(4, node_limit=2)
    assert plan.ok and [n.name for n in plan.nodes] == ["spark1", "spark2"] and plan.tp == 2
    assert _has(plan.warnings, "the recipe runs on at most 2")
    plan, *_ = _plan(4, node_limit=2, nodes=["spark3", "spark4", "spark1"])  # named nodes win
    assert [n.name for n in plan.nodes] == ["spark3", "spark4", "spark1"]
