"""The config `sparktui demo` writes is an ordinary, valid sparktui config that says it is a simulation."""

from __future__ import annotations

import pytest

from sparktui.core.config.config import load_config_text
from sparktui.demo import configfile

PORTS = {"sglang": 31000, "vllm": 31001, "dist": 31002, "ray": 31003, "trtllm": 31004}


def render(scenario: str, speed: float = 10.0) -> str:
    nodes = [
        configfile.NodeEntry("spark1", "127.0.0.11", 2201, "head"),
        configfile.NodeEntry("spark2", "127.0.0.12", 2202, "worker"),
    ]
    return configfile.render(
        nodes,
        identity_file="/d/client/id_ed25519",
        known_hosts="/d/known_hosts",
        model_name="m",
        model_path="/d/models/m",
        source="spark1",
        speed=speed,
        scenario=scenario,
        ports=PORTS,
        hang_after=90 / speed,
    )


@pytest.mark.parametrize("scenario", sorted(configfile.SCENARIOS))
def test_config_loads_and_names_the_demo(scenario):
    cfg = load_config_text(render(scenario), "demo.yaml")
    assert "DEMO" in cfg.cluster and "simulated" in cfg.cluster
    assert [n.name for n in cfg.nodes] == ["spark1", "spark2"] and cfg.head.name == "spark1"
    assert cfg.model.path == "/d/models/m" and cfg.model.source == "spark1"
    assert cfg.ssh.ssh_config == [] and cfg.ssh.known_hosts == "/d/known_hosts"
    assert (cfg.engine.sglang_port, cfg.engine.dist_port) == (PORTS["sglang"], PORTS["dist"])
    # TensorRT-LLM serves on a port the demo picked free too, not its playbook's 8355 (engines.trtllm.port)
    assert cfg.port_for("trtllm") == PORTS["trtllm"]
    assert cfg.image_for("trtllm") == "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5"


def test_only_the_pivot_scenario_makes_sglang_hang():
    pivot = load_config_text(render("pivot")).docker.env
    happy = load_config_text(render("happy")).docker.env
    assert pivot["SPARKTUI_SIM_SCENARIO"] == "sglang-host-ip"
    assert "SPARKTUI_SIM_SCENARIO" not in happy
    assert pivot["SPARKTUI_SIM_SPEED"] == happy["SPARKTUI_SIM_SPEED"] == "10"


def test_hang_detection_follows_the_speed():
    slow = load_config_text(render("pivot", speed=2)).engine.hang_after
    fast = load_config_text(render("pivot", speed=30)).engine.hang_after
    assert fast < slow


def test_the_collective_timeout_scenario_reaches_the_engines_and_wedge_detection_follows_the_speed():
    cfg = load_config_text(render("collective-timeout"))
    assert cfg.docker.env["SPARKTUI_SIM_SCENARIO"] == "collective-timeout"
    # at speed 10 the watchdog ends the hang 60 s after it starts: `wedged` must show before that
    assert cfg.engine.wedge_after < 600 / 10
    assert load_config_text(render("happy", speed=30)).engine.wedge_after < cfg.engine.wedge_after


def test_the_unsupported_scenario_runs_the_stock_sglang_image_on_a_qwen35_model():
    from sparktui.demo import checkpoint

    cfg = load_config_text(render("unsupported"))
    assert cfg.images.sglang == "lmsysorg/sglang:spark"  # SGLang 0.5.3.post3: no Qwen3.5 in its registry
    assert cfg.images.vllm == load_config_text(render("happy")).images.vllm
    assert configfile.SCENARIO_MODELS["unsupported"]["model_type"] == "qwen3_5_moe"
    assert "SPARKTUI_SIM_SCENARIO" not in cfg.docker.env
    assert checkpoint.QWEN35["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
