"""The demo offers TensorRT-LLM: the launch form lists it, pivot reaches it, and the demo's nodes hold its image."""

import pytest

from sparktui.core.engines import ENGINES
from sparktui.core.deploy.options import other_engine
from sparktui.demo.docker import images
from sparktui.sim import trtllm_args
from sparktui.tui.forms import choices

pytestmark = pytest.mark.unit


def test_the_launch_form_lists_tensorrt_llm_with_its_mpi_mode():
    assert ("TensorRT-LLM", ("trtllm", "mpi")) in choices.ENGINES


def test_the_pivot_key_keeps_between_sglang_and_vllm_and_takes_trtllm_back_to_the_default():
    names = list(ENGINES)
    assert other_engine("sglang") == "vllm" and other_engine("vllm") == "sglang"  # as before a third engine
    assert other_engine("trtllm") == names[0]  # TensorRT-LLM is chosen on purpose: pivot --to trtllm


def test_the_demo_nodes_hold_the_default_tensorrt_llm_image_at_the_release_the_simulator_reports():
    ref = ENGINES["trtllm"].default_image
    assert ref in images.CATALOG
    env = dict(kv.split("=", 1) for kv in images.CATALOG[ref]["env"])
    assert env[trtllm_args.VERSION_ENV] == ref.rsplit(":", 1)[1]


def test_the_form_hides_the_dist_port_for_launches_that_dial_no_torch_rendezvous():
    shown = {key: choices.uses_dist_port(key) for _, key in choices.engine_options()}
    assert shown["trtllm:mpi"] is False and shown["vllm:ray"] is False
    assert shown["sglang:native"] is True and shown["vllm:native"] is True
